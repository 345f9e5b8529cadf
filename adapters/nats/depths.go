package nats

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// Depths reports, for each named queue: Ready = its consumers' NumPending (stored, due, never
// delivered or given back), InFlight = their NumAckPending (delivered and not yet
// acknowledged, including deliveries whose lease ran out and that wait for redelivery), Delayed
// = the queue's pending message schedules (delayed publishes and retries). The consumers are
// the main one and, on an Ordered queue, the key partitions' (one listing call): a keyed batch
// waiting behind its partition's head counts as ready, and a delayed keyed batch (stored in
// place) as ready until its partition hands it out, then in flight while hidden. A queue whose
// stream does not exist reports zeros; Depths never creates streams. Before any node fetched
// a queue (no consumer yet) every stored due batch counts as ready.
func (be *Backend) Depths(ctx context.Context, queues []string) (map[string]core.Depth, error) {
	if err := be.usable(ctx, "depths", ""); err != nil {
		return nil, err
	}
	out := make(map[string]core.Depth, len(queues))
	for _, name := range queues {
		if err := checkQueue("depths", name); err != nil {
			return nil, err
		}
		d, err := be.depth(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = d
	}
	return out, nil
}

func (be *Backend) depth(ctx context.Context, name string) (core.Depth, error) {
	be.mu.Lock()
	q := be.queueStateLocked(name)
	be.mu.Unlock()
	// The stream this Backend already set up, when it has (no server call: on a cluster, a
	// stream lookup waits until a stream being created has a leader); else a lookup. Each
	// server call has its own Options.Timeout, as everywhere (see Options.Timeout).
	var stream jetstream.Stream
	if q.setup.TryLock() { // a setup in progress holds it: look the stream up instead
		stream = q.stream
		q.setup.Unlock()
	}
	if stream == nil {
		cctx, cancel := be.callCtx(ctx)
		s, err := be.js.Stream(cctx, q.streamName)
		cancel()
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return core.Depth{}, nil
		}
		if err != nil {
			return core.Depth{}, wrap("depths", name, err)
		}
		stream = s
	}
	var d core.Depth
	var mainSeen, partSeen bool
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	list := stream.ListConsumers(cctx)
	for info := range list.Info() {
		switch {
		case info.Name == consumerName:
			mainSeen = true
		case strings.HasPrefix(info.Name, consumerName+"-k"):
			partSeen = true
		default:
			continue
		}
		d.Ready += int64(info.NumPending)
		d.InFlight += int64(info.NumAckPending)
	}
	if err := list.Err(); err != nil {
		return core.Depth{}, wrap("depths", name, err)
	}
	cancel()
	// Before any node fetched a lane (no consumer yet) its stored batches count as ready.
	for _, c := range []struct {
		seen   bool
		filter string
	}{{mainSeen, q.ready}, {partSeen, q.prefix + "k.>"}} {
		if c.seen {
			continue
		}
		n, err := be.subjectCount(ctx, stream, c.filter)
		if err != nil {
			return core.Depth{}, wrap("depths", name, err)
		}
		d.Ready += n
	}
	n, err := be.subjectCount(ctx, stream, q.schedFilter())
	if err != nil {
		return core.Depth{}, wrap("depths", name, err)
	}
	d.Delayed = n
	return d, nil
}

// subjectCount counts the stream's messages on subjects matching filter, in one server call
// with its own Options.Timeout.
func (be *Backend) subjectCount(ctx context.Context, s jetstream.Stream, filter string) (int64, error) {
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	info, err := s.Info(cctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range info.State.Subjects {
		n += int64(c)
	}
	return n, nil
}
