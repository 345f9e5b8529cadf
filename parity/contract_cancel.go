package parity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "cancelled_fetch_loses_nothing", run: cancelledFetch},
		property{name: "cancelled_publish_and_settle", run: cancelledPublish},
	)
}

// cancelledFetch: a Fetch whose ctx is done before the call, or ends while it waits (as work
// arrives, or not), returns within PromptBound with nil or ctx's error, and loses nothing:
// whatever it took and did not return comes back (at the latest after its lease) and is
// handed out to another client. The lease is one the machine keeps (keptLease of 2 s): the
// claims a cancelled Fetch returned are acked after it, on a loaded machine late.
func cancelledFetch(x *X) {
	b, other := x.rawClient(), x.rawClient()
	qn := x.queueName()
	lease := x.keptLease(max(x.Caps.Lease, 2*time.Second))
	var published []string
	returned := map[string]bool{}
	check := func(what string, cs []*core.Claim, err error, took time.Duration) {
		x.T.Helper()
		if err != nil && !ctxErr(err) {
			x.T.Errorf("%s: %v; want nil or ctx's error", what, err)
		}
		if took > PromptBound {
			x.T.Errorf("%s returned after %v; want within %v", what, took, PromptBound)
		}
		for _, c := range cs {
			if c == nil || c.Queue != qn {
				x.T.Errorf("%s returned a claim of another queue: %+v", what, c)
				continue
			}
			returned[c.ID] = true
			if err := b.Ack(x.ctx(), c); err != nil {
				x.T.Errorf("Ack of a claim a cancelled Fetch returned: %v", err)
			}
		}
	}
	publish := func(k string) {
		batch := rawBatch(qn, false, k)
		if err := other.Publish(x.ctx(), batch); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		published = append(published, batch.ID)
	}

	publish("before")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	cs, err := b.Fetch(done, req1("parity-cancel", qn, core.Unlimited, lease, 4*time.Second))
	check("a Fetch with a done ctx", cs, err, time.Since(start))

	// A Fetch waiting on the queue, its ctx cancelled: with no work, as work arrives, and
	// just after.
	for round, gap := range []time.Duration{-1, 0, 20 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			cs  []*core.Claim
			err error
		}
		got := make(chan result, 1)
		go func() {
			cs, err := b.Fetch(ctx, req1("parity-cancel", qn, core.Unlimited, lease, 4*time.Second))
			got <- result{cs, err}
		}()
		sleep(x.Caps.PollWait + 200*time.Millisecond)
		if gap >= 0 {
			publish(fmt.Sprintf("round-%d", round))
			sleep(gap)
		}
		cancel()
		start := time.Now()
		select {
		case r := <-got:
			check(fmt.Sprintf("a waiting Fetch cancelled (round %d)", round), r.cs, r.err, time.Since(start))
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("a waiting Fetch has not returned %v after its ctx was cancelled", x.Caps.Timeout)
		}
	}

	var want []string
	for _, id := range published {
		if !returned[id] {
			want = append(want, id)
		}
	}
	seen := collect(x, other, qn, lease, len(want))
	for _, id := range want {
		if seen[id] == 0 {
			x.T.Errorf("batch %s, published while Fetch calls were cancelled, never came back", id)
		}
	}
	for id := range returned {
		if seen[id] > 0 {
			x.T.Errorf("batch %s, returned by a cancelled Fetch and acked, was handed out again", id)
		}
	}
}

// cancelledPublish: a Publish whose ctx is done before the call returns an error wrapping ctx's
// error (or core.ErrBackendUnavailable); publishes racing their ctx's deadline either succeed
// and are stored once, or fail that way and are stored at most once. A settle or extension
// with a done ctx returns nil or such an error, and the claim can be settled afterwards.
func cancelledPublish(x *X) {
	b, other := x.rawClient(), x.rawClient()
	qn := x.queueName()
	lease := 3 * x.Caps.Lease
	okErr := func(err error) bool { return ctxErr(err) || errors.Is(err, core.ErrBackendUnavailable) }

	done, cancel := context.WithCancel(context.Background())
	cancel()
	first := rawBatch(qn, false, "done")
	if err := b.Publish(done, first); err == nil || !okErr(err) {
		x.T.Errorf("Publish with a done ctx: %v; want an error wrapping ctx's error or core.ErrBackendUnavailable", err)
	}

	const n = 20
	var (
		mu     sync.Mutex
		stored = map[string]bool{} // id -> Publish returned nil
		wg     sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			batch := rawBatch(qn, false, fmt.Sprintf("race-%d", i))
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*time.Millisecond)
			defer cancel()
			err := b.Publish(ctx, batch)
			if err != nil && !okErr(err) {
				x.T.Errorf("Publish whose ctx ran out: %v; want nil or an error wrapping ctx's error or core.ErrBackendUnavailable", err)
			}
			mu.Lock()
			stored[batch.ID] = err == nil
			mu.Unlock()
		})
	}
	wg.Wait()
	seen := collect(x, other, qn, lease, 0)
	if seen[first.ID] > 1 {
		x.T.Errorf("the batch published with a done ctx was stored %d times", seen[first.ID])
	}
	for id, ok := range stored {
		switch {
		case ok && seen[id] != 1:
			x.T.Errorf("batch %s: Publish returned nil and it was handed out %d times; want once", id, seen[id])
		case !ok && seen[id] > 1:
			x.T.Errorf("batch %s: Publish failed and it was stored %d times; want at most once", id, seen[id])
		}
	}

	// Settles and extensions with a done ctx.
	if err := b.Publish(x.ctx(), rawBatch(qn, false, "settle")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	c := fetchOne(x, b, qn, lease)
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Extend", func() error { return b.Extend(done, c, lease) }},
		{"Depths", func() error { _, err := b.Depths(done, []string{qn}); return err }},
		{"Ack", func() error { return b.Ack(done, c) }},
	}
	for _, call := range calls {
		took, err := timedCall(x, call.name+" with a done ctx", call.fn)
		if err != nil && !okErr(err) {
			x.T.Errorf("%s with a done ctx: %v; want nil or an error wrapping ctx's error or core.ErrBackendUnavailable", call.name, err)
		}
		if took > PromptBound {
			x.T.Errorf("%s with a done ctx took %v; want within %v", call.name, took, PromptBound)
		}
	}
	if err := b.Ack(x.ctx(), c); err != nil {
		x.T.Errorf("Ack after an Ack with a done ctx: %v; want nil (the batch acked now, or a no-op)", err)
	}
	if seen := collect(x, other, qn, lease, 0); len(seen) > 0 {
		x.T.Errorf("an acked batch was handed out again")
	}
}
