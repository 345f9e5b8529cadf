package parity

import (
	"context"
	"errors"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "no_adapter_retries", run: noAdapterRetries},
	)
}

// noAdapterRetries: while the backend is broken, every call (Publish, Fetch, Extend, Retry,
// Drop, Ack, Depths) returns an error wrapping core.ErrBackendUnavailable within
// UnavailableBound, instead of retrying until the backend comes back: the node owns retries,
// backoff and budgets. After Restore the batch whose Publish failed is stored at most once, and
// the claim taken before the outage is still there to settle (or comes back after its lease).
func noAdapterRetries(x *X) {
	b := x.rawClient()
	qn := x.queueName()
	lease := 3 * x.Caps.Lease
	ctx, cancel := context.WithTimeout(context.Background(), 3*x.Caps.Timeout)
	defer cancel()
	held := rawBatch(qn, false, "held")
	if err := b.Publish(ctx, held); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	c := fetchOne(x, b, qn, lease)
	failed := rawBatch(qn, false, "failed")

	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Publish", func() error { return b.Publish(ctx, failed) }},
		{"Fetch", func() error {
			_, err := b.Fetch(ctx, req1("parity-outage", qn, 1, lease, x.Caps.PollWait))
			return err
		}},
		{"Extend", func() error { return b.Extend(ctx, c, lease) }},
		{"Retry", func() error { return b.Retry(ctx, c, c.Body, 0) }},
		{"Drop", func() error { return b.Drop(ctx, c, core.ReasonDeliveryExhausted) }},
		{"Ack", func() error { return b.Ack(ctx, c) }},
		{"Depths", func() error { _, err := b.Depths(ctx, []string{qn}); return err }},
	}
	for _, call := range calls {
		took, err := timedCall(x, call.name+" on a broken backend", call.fn)
		if !errors.Is(err, core.ErrBackendUnavailable) {
			x.T.Errorf("%s on a broken backend: %v after %v; want an error wrapping core.ErrBackendUnavailable", call.name, err, took)
		} else if took > UnavailableBound {
			x.T.Errorf("%s on a broken backend returned after %v; want within %v (the node retries, not the adapter)", call.name, took, UnavailableBound)
		}
	}
	x.Env.Restore(x.T)
	restored = true

	// The held claim is still the caller's (its settles failed) or comes back after its
	// lease: either way it is acked once below. The failed publish is stored at most once.
	x.eventually(func() bool {
		err := b.Ack(ctx, c)
		return err == nil || errors.Is(err, core.ErrLeaseLost)
	}, "the claim held through the outage can be acked (or is lost) after Restore")
	seen := collect(x, b, qn, lease, 0)
	if n := seen[failed.ID]; n > 1 {
		x.T.Errorf("the batch whose Publish failed during the outage was stored %d times; want at most once", n)
	}
	if n := seen[held.ID]; n > 1 {
		x.T.Errorf("the batch held through the outage was handed out %d times after it", n)
	}
}
