package parity

import (
	"errors"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("outcomes",
		property{name: "splitter_replaces_claim_atomically", run: splitterReplacesClaim},
	)
}

// needSplitter returns b's core.Splitter, or ends the property as not supported.
func (x *X) needSplitter(b core.Backend) core.Splitter {
	x.T.Helper()
	s, ok := b.(core.Splitter)
	if !ok {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: no core.Splitter (the engine publishes the parts, then acks)", x.h.Name())
	}
	return s
}

// splitterReplacesClaim: an adapter's Split removes the claimed batch and stores the parts in
// one step: the batch is never handed out again, a part without delay comes at once, a delayed
// part not before its delay; Split of a claim whose lease ran out returns an error wrapping
// core.ErrLeaseLost and stores no part (the batch alone comes back); a keyed part is refused.
func splitterReplacesClaim(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	sp := x.needSplitter(b)
	const delay = 600 * time.Millisecond
	q := x.queueName()
	orig := rawBatch(q, false, "a", "b", "c")
	if err := b.Publish(ctx, orig); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	long := 10 * x.Caps.Lease // claims this property settles: a loaded machine must not lose them
	c := fetchOne(x, b, q, long)
	now := rawBatch(q, false, "a")
	later := rawBatch(q, false, "b", "c")
	later.Delay = delay
	keyed := rawBatch(q, false, "k")
	keyed.Key = "k"
	if err := sp.Split(ctx, c, []core.Part{keyed}); !errors.Is(err, core.ErrInvalidConfig) {
		x.T.Errorf("Split with a keyed part: %v; want an error wrapping core.ErrInvalidConfig", err)
	}
	at := time.Now()
	if err := sp.Split(ctx, c, []core.Part{now, later}); err != nil {
		x.T.Fatalf("Split: %v", err)
	}
	if err := sp.Split(ctx, c, []core.Part{now, later}); err != nil {
		x.T.Errorf("Split of a settled claim again: %v; want a no-op", err)
	}
	first := fetchOne(x, b, q, long)
	if first.ID != now.ID {
		x.T.Fatalf("after Split the first batch handed out is %s; want the undelayed part %s", first.ID, now.ID)
	}
	if err := b.Ack(ctx, first); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}
	second := fetchOne(x, b, q, long)
	if second.ID != later.ID {
		x.T.Fatalf("after Split the second batch handed out is %s; want the delayed part %s", second.ID, later.ID)
	}
	if took := time.Since(at); took < delay-backendClockStep {
		x.T.Errorf("the delayed part came %v after Split; want at least %v", took, delay)
	}
	if err := b.Ack(ctx, second); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}

	// A lost lease: nothing stored, the batch comes back whole.
	lostQ := x.queueName()
	lost := rawBatch(lostQ, false, "x", "y")
	if err := b.Publish(ctx, lost); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	stale := fetchOne(x, b, lostQ, x.Caps.Lease)
	sleep(time.Until(stale.LeaseUntil) + 100*time.Millisecond)
	part := rawBatch(lostQ, false, "x")
	if err := sp.Split(ctx, stale, []core.Part{part}); !errors.Is(err, core.ErrLeaseLost) {
		x.T.Errorf("Split of a claim whose lease ran out: %v; want an error wrapping core.ErrLeaseLost", err)
	}
	seen := collect(x, b, lostQ, x.Caps.Lease, 1)
	if seen[lost.ID] != 1 || len(seen) != 1 {
		x.T.Errorf("after a refused Split the queue handed out %v; want the original batch %s once and no part", seen, lost.ID)
	}
	if seen := collect(x, b, q, long, 0); len(seen) != 0 {
		x.T.Errorf("after Split and the parts' Acks the queue still handed out %v; want nothing (the split batch is gone)", seen)
	}
}
