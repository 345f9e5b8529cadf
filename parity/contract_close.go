package parity

import (
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "after_close", run: afterClose},
	)
}

// closeWait is the Wait of the Fetch that Close interrupts.
const closeWait = 4 * time.Second

// CloseBound is how long Close may take. An adapter may let a request it already sent end on
// its own rather than cut it (a long poll cut short may have hidden messages the client then
// drops, each coming back with a delivery counted that never ran), but only one that waits no
// longer than its caller asked (after_close's Fetch waits closeWait), plus the time a call
// may take to fail: a long poll of the adapter's own that outlives its Fetch (SQS's idle
// receives wait up to 20 s) must be ended early, without cutting it (sqs sends it a wake
// message), or a node's shutdown waits it out.
const CloseBound = closeWait + UnavailableBound

// afterClose: Close while a Fetch waits ends that Fetch promptly (nothing, or an error
// wrapping core.ErrClosed); Close returns within CloseBound; afterwards every method
// returns an error wrapping core.ErrClosed promptly, without blocking or panicking, a claim
// taken before the Close included; Close again returns nil.
func afterClose(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	qn, idle := x.queueName(), x.queueName()
	lease := 3 * x.Caps.Lease
	if err := b.Publish(ctx, rawBatch(qn, false, "held")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	c := fetchOne(x, b, qn, lease)

	type result struct {
		n    int
		err  error
		took time.Duration
	}
	waiting := make(chan result, 1)
	go func() {
		start := time.Now()
		cs, err := b.Fetch(ctx, req1("parity-close", idle, 1, lease, closeWait))
		waiting <- result{len(cs), err, time.Since(start)}
	}()
	sleep(x.Caps.PollWait + 200*time.Millisecond) // the Fetch is waiting
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- b.Close() }()
	select {
	case r := <-waiting:
		if since := time.Since(start); since > PromptBound {
			x.T.Errorf("a waiting Fetch returned %v after Close; want within %v", since, PromptBound)
		}
		if r.err != nil && !errors.Is(r.err, core.ErrClosed) {
			x.T.Errorf("a Fetch waiting when Close ran returned %v; want nil or an error wrapping core.ErrClosed", r.err)
		}
		if r.n != 0 {
			x.T.Errorf("a Fetch of an empty queue returned %d claims", r.n)
		}
	case <-time.After(closeWait + PromptBound):
		x.T.Fatalf("a Fetch waiting when Close ran has not returned after %v (its Wait is %v)", closeWait+PromptBound, closeWait)
	}
	select {
	case err := <-closed:
		if err != nil {
			x.T.Errorf("Close: %v", err)
		}
	case <-time.After(CloseBound):
		x.T.Fatalf("Close has not returned after %v", CloseBound)
	}

	body := rawBatch(qn, false, "after").Body
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Publish", func() error { return b.Publish(ctx, rawBatch(qn, false, "after")) }},
		{"Fetch", func() error {
			cs, err := b.Fetch(ctx, req1("parity-close", qn, 1, lease, closeWait))
			if len(cs) > 0 {
				return fmt.Errorf("%d claims", len(cs))
			}
			return err
		}},
		{"Extend", func() error { return b.Extend(ctx, c, lease) }},
		{"Retry", func() error { return b.Retry(ctx, c, body, 0) }},
		{"Drop", func() error { return b.Drop(ctx, c, core.ReasonDeliveryExhausted) }},
		{"Ack", func() error { return b.Ack(ctx, c) }},
		{"Depths", func() error { _, err := b.Depths(ctx, []string{qn}); return err }},
	}
	for _, call := range calls {
		took, err := timedCall(x, call.name+" after Close", call.fn)
		if !errors.Is(err, core.ErrClosed) {
			x.T.Errorf("%s after Close: %v; want an error wrapping core.ErrClosed", call.name, err)
		}
		if took > PromptBound {
			x.T.Errorf("%s after Close took %v; want within %v", call.name, took, PromptBound)
		}
	}
	took, err := timedCall(x, "a second Close", b.Close)
	if err != nil || took > PromptBound {
		x.T.Errorf("a second Close: %v after %v; want nil at once", err, took)
	}
}
