package parity

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("faults",
		property{name: "terminal_once_when_drop_fails_once", run: func(x *X) { terminalOnce(x, 1) }},
		// More failures than the engine's settle attempts (3): the batch comes back after its lease.
		property{name: "terminal_once_when_drop_fails_past_lease", run: func(x *X) { terminalOnce(x, 4) }},
	)
}

// terminalOnce: a batch spends its budget on node A, whose next dropFails Drop calls fail with
// ErrBackendUnavailable. The engine retries the Drop; when it keeps failing, the batch comes back
// after its lease, to A or to node B (started once the dead letter exists). Either way the
// terminal path ran once: OnError fired exactly once, there is one dead letter, with reason
// delivery_exhausted and the listener's error, and the batch is gone from the backend.
func terminalOnce(x *X, dropFails int64) {
	const budget = 2
	var onErr atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, OnError: func([]Msg, error, int) error { onErr.Add(1); return nil }})
	rec := newRecorder()
	fail := func(context.Context, []Msg) error { return errBoom }
	a, f := x.faultyNode(txmq.NodeOptions{})
	f.dropFails.Store(dropFails)
	listen(x, rec, q, a, fail)
	publishKeys(x, q, a, "doomed", 1, 1)
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 }, func() string {
		return fmt.Sprintf("the batch dead-lettered on node A; runs so far: %s", rec.Summary())
	})
	b := x.node(txmq.NodeOptions{})
	listen(x, rec, q, b, fail)
	probe := x.rawClient()
	x.eventually(func() bool { return f.drops.Load() >= 1 && depths(x, probe, q.Name()) == core.Depth{} },
		func() string {
			return fmt.Sprintf("the batch removed from the backend (depths %s, %d Drop calls on A, %d failing)", depthString(depths(x, probe, q.Name())), f.drops.Load(), dropFails)
		})
	x.idle(a, b)
	sleep(3 * x.Caps.PollWait) // a wrong redelivery would show now
	if got := onErr.Load(); got != 1 {
		x.T.Fatalf("OnError fired %d times; want exactly once per batch id", got)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 {
		x.T.Fatalf("%d dead letters; want 1", len(letters))
	}
	if l := letters[0]; l.Reason != core.ReasonDeliveryExhausted || l.Error != errBoom.Error() || l.Attempts != budget {
		x.T.Fatalf("dead letter has reason %q, error %q, attempts %d; want %q, %q, %d (the first terminal's)", l.Reason, l.Error, l.Attempts, core.ReasonDeliveryExhausted, errBoom.Error(), budget)
	}
	if r := rec.Runs(); r != budget {
		x.T.Fatalf("listener ran %d times; want %d", r, budget)
	}
}
