package nats

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// maxSetupCalls is how many queues one Fetch sets up (stream and consumer looked up or
// created) at the same time: enough to overlap the waits for Raft elections, few enough not to
// queue a burst of requests at the meta leader, where each would wait for the ones ahead of
// it (twenty at once from two nodes made single calls exceed Options.Timeout).
const maxSetupCalls = 4

// queueSetup is one requested queue of a Fetch with its stream and consumer on the server.
type queueSetup struct {
	q       *queueState
	cons    jetstream.Consumer
	ackWait time.Duration
}

// setupQueues returns, for each of the Fetch's queues (in order), its state with its stream
// and consumer looked up or created on the server (see queue and consumer). Queues not yet set
// up in this Backend are set up concurrently: in a cluster, creating a replicated stream or
// consumer waits for its Raft group to elect a leader, and a node's first Fetch of twenty
// queues one after the other spent tens of seconds there before its first pull. A queue already
// set up costs no server call. The first error is returned, as core.ErrClosed when the Backend
// was closed meanwhile (a setup cut short by Close is not an outage).
func (be *Backend) setupQueues(ctx context.Context, queues []core.QueueSlots, lease time.Duration) ([]queueSetup, error) {
	out := make([]queueSetup, len(queues))
	for _, qs := range queues {
		if err := checkQueue("fetch", qs.Queue); err != nil {
			return nil, err
		}
	}
	one := func(i int) error {
		q, err := be.queue(ctx, "fetch", queues[i].Queue)
		if err != nil {
			return err
		}
		cons, ackWait, err := be.consumer(ctx, q, queues[i].Exclusive, lease)
		if err != nil {
			return err
		}
		out[i] = queueSetup{q: q, cons: cons, ackWait: ackWait}
		return nil
	}
	var pending []int // queues that need a server call
	for i, qs := range queues {
		if s, ok := be.setUp(qs.Queue, qs.Exclusive, lease); ok {
			out[i] = s
		} else {
			pending = append(pending, i)
		}
	}
	var err error
	if len(pending) == 1 {
		err = one(pending[0])
	} else if len(pending) > 1 {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		sem := make(chan struct{}, maxSetupCalls)
		for _, i := range pending {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if e := one(i); e != nil {
					mu.Lock()
					if first == nil {
						first = e
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		err = first
	}
	if err != nil {
		be.mu.Lock()
		closed := be.closed
		be.mu.Unlock()
		if closed {
			return nil, errClosed("fetch", "")
		}
		return nil, err
	}
	return out, nil
}

// setUp returns the queue's stream and consumer when this Backend already has them as a Fetch
// with this exclusivity and lease needs them (see consumer), without a server call.
func (be *Backend) setUp(name string, exclusive bool, lease time.Duration) (queueSetup, bool) {
	be.mu.Lock()
	q, ok := be.queues[name]
	be.mu.Unlock()
	if !ok {
		return queueSetup{}, false
	}
	q.setup.Lock()
	defer q.setup.Unlock()
	if q.stream == nil || q.cons == nil || q.exclusive != exclusive || q.ackWait < max(be.opts.AckWait, lease) {
		return queueSetup{}, false
	}
	return queueSetup{q: q, cons: q.cons, ackWait: q.ackWait}, true
}
