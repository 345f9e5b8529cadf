package nats

import (
	"context"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// maxSetupCalls is how many streams or consumers one Fetch sets up (looks up or creates) at
// the same time: enough to overlap the waits for Raft elections, few enough not to queue a
// burst of requests at the meta leader, where each would wait for the ones ahead of it (twenty
// at once from two nodes made single calls exceed Options.Timeout).
const maxSetupCalls = 4

// setupQueues returns the Fetch's slots: for each of its queues (in order) its main lane and,
// on an Ordered queue that is not Exclusive, each key partition's lane, all sharing the
// queue's Free (see slot), with their consumers looked up or created on the server (see queue
// and consumer). What this Backend has not set up yet is set up concurrently, maxSetupCalls
// calls at a time, in two rounds: the queues' streams (a stream gives its queue's partitions),
// then the lanes' consumers of every queue together. In a cluster, creating a replicated
// stream or consumer waits for its Raft group to elect a leader: a node's first Fetch of twenty
// queues one after the other spent tens of seconds there before its first pull, and an Ordered
// queue has Partitions+1 consumers. A queue and lanes already set up cost no server call. The
// first error (in the queues' order) is returned, as core.ErrClosed when the Backend was closed
// meanwhile (a setup cut short by Close is not an outage).
func (be *Backend) setupQueues(ctx context.Context, queues []core.QueueSlots, lease time.Duration) ([]*slot, error) {
	for _, qs := range queues {
		if err := checkQueue("fetch", qs.Queue); err != nil {
			return nil, err
		}
	}
	qstates := make([]*queueState, len(queues))
	var pending []int // queues whose stream needs a server call
	for i, qs := range queues {
		if q := be.knownQueue(qs.Queue); q != nil {
			qstates[i] = q
		} else {
			pending = append(pending, i)
		}
	}
	err := concurrently(pending, func(i int) error {
		q, err := be.queue(ctx, "fetch", queues[i].Queue)
		qstates[i] = q
		return err
	})
	if err != nil {
		return nil, be.setupErr(err)
	}
	wantWait := max(be.opts.AckWait, lease)
	var slots []*slot
	var exclusive []bool // per slot: its queue's exclusivity
	pending = pending[:0]
	for i, qs := range queues {
		q := qstates[i]
		want := new(int)
		*want = qs.Free
		lanes := []*lane{q.lane}
		if qs.Ordered && !qs.Exclusive {
			be.mu.Lock()
			lanes = q.lanes()
			be.mu.Unlock()
		}
		for _, l := range lanes {
			s := &slot{l: l, want: want}
			var ok bool
			if s.cons, s.ackWait, ok = l.cached(qs.Exclusive, wantWait); !ok {
				pending = append(pending, len(slots))
			}
			slots = append(slots, s)
			exclusive = append(exclusive, qs.Exclusive)
		}
	}
	err = concurrently(pending, func(j int) error {
		s := slots[j]
		var err error
		s.cons, s.ackWait, err = be.consumer(ctx, s.l, exclusive[j], lease)
		return err
	})
	if err != nil {
		return nil, be.setupErr(err)
	}
	return slots, nil
}

// knownQueue returns the named queue's state when this Backend already has its stream, else
// nil.
func (be *Backend) knownQueue(name string) *queueState {
	be.mu.Lock()
	q, ok := be.queues[name]
	be.mu.Unlock()
	if !ok {
		return nil
	}
	q.setup.Lock()
	defer q.setup.Unlock()
	if q.stream == nil {
		return nil
	}
	return q
}

// setupErr returns err, a failed setup's, or core.ErrClosed (wrapped) when the Backend was
// closed meanwhile.
func (be *Backend) setupErr(err error) error {
	be.mu.Lock()
	closed := be.closed
	be.mu.Unlock()
	if closed {
		return errClosed("fetch", "")
	}
	return err
}

// concurrently runs fn for each of idx, at most maxSetupCalls at a time (in the caller's
// goroutine when there is only one), and returns the first error in idx's order.
func concurrently(idx []int, fn func(int) error) error {
	switch len(idx) {
	case 0:
		return nil
	case 1:
		return fn(idx[0])
	}
	errs := make([]error, len(idx))
	sem := make(chan struct{}, maxSetupCalls)
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[k] = fn(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
