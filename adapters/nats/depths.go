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
	// A setup of this queue in progress in this Backend is waited for, within the bound of
	// one server call, rather than raced: in a cluster, a request about a stream or consumer
	// that is created but has no leader yet gets no answer at all (nats-server's info
	// handlers stay silent until a leader is elected), and a consumer listing waits up to 4 s
	// for every consumer's leader, so a Depths overlapping this Backend's own creations ran
	// out its Options.Timeout. The wait gives the stream this Backend set up (no server call);
	// a stream it has not set up is looked up (each server call has its own Options.Timeout,
	// as everywhere, see Options.Timeout).
	wctx, wcancel := be.callCtx(ctx)
	defer wcancel()
	if err := q.setup.lockCtx(wctx); err != nil {
		return core.Depth{}, wrap("depths: waiting for this client's setup of stream "+q.streamName, name, err)
	}
	stream := q.stream
	q.setup.Unlock()
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
	// The lanes whose consumer this Backend has not set up are held for the listing (see
	// above): this Backend creates none of their consumers meanwhile (a Fetch setting one up
	// waits for the listing, one call), while Fetches of lanes set up go on unhindered.
	be.mu.Lock()
	lanes := q.lanes()
	be.mu.Unlock()
	var held []*lane
	release := func() {
		for _, l := range held {
			l.consMu.Unlock()
		}
	}
	for _, l := range lanes {
		if err := l.consMu.lockCtx(wctx); err != nil {
			release()
			return core.Depth{}, wrap("depths: waiting for this client's setup of consumer "+l.consumer+" of stream "+q.streamName, name, err)
		}
		if l.cons != nil {
			l.consMu.Unlock()
			continue
		}
		held = append(held, l)
	}
	d, mainSeen, partSeen, err := be.listConsumers(ctx, stream)
	release()
	if err != nil {
		return core.Depth{}, wrap("depths", name, err)
	}
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

// listConsumers sums the NumPending (as Ready) and NumAckPending (as InFlight) of the queue's
// consumers (the main one and the key partitions'), in one listing call with its own
// Options.Timeout, and says whether the main consumer and any partition's were there.
func (be *Backend) listConsumers(ctx context.Context, stream jetstream.Stream) (d core.Depth, mainSeen, partSeen bool, err error) {
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
	return d, mainSeen, partSeen, list.Err()
}
