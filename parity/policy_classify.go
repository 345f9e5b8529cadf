package parity

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("policy",
		property{name: "classify_error_decides", dup: true, run: classifyErrorDecides},
	)
}

// errStale is an error a queue's ClassifyError discards.
var errStale = errors.New("parity: the order was cancelled meanwhile")

// classifyErrorDecides: a queue's ClassifyError turns a listener's plain errors into the
// policy's marks: one it marks Permanent is dead-lettered after its first run (reason
// permanent, OnError once, no retry), whatever budget is left; one it marks Discard is done
// without a dead letter and counted as discarded; one it leaves alone is retried by the
// budget (a second run), and each call is told its run number.
func classifyErrorDecides(x *X) {
	var badRun atomic.Value
	classify := func(err error, run int) error {
		if run < 1 {
			badRun.Store(fmt.Sprintf("ClassifyError got run %d; want 1-based run numbers", run))
		}
		switch {
		case errors.Is(err, errBoom):
			return txmq.Permanent(err)
		case errors.Is(err, errStale):
			return txmq.Discard("stale")
		}
		return nil // kept as it is: retried
	}
	var onErr atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 5, MaxBatchMessages: 1, ClassifyError: classify,
		OnError: func([]Msg, error, int) error { onErr.Add(1); return nil }})
	rec := newRecorder()
	var plainRuns atomic.Int64
	fn := func(_ context.Context, msgs []Msg) error {
		switch msgs[0].K {
		case "boom-0":
			return fmt.Errorf("charge: %w", errBoom)
		case "stale-0":
			return fmt.Errorf("ship: %w", errStale)
		case "plain-0":
			if plainRuns.Add(1) == 1 {
				return errors.New("a timeout worth retrying")
			}
		}
		return nil
	}
	a := x.node(x.steadyLease()) // counts runs exactly: a lost lease would add one
	listen(x, rec, q, a, fn)
	publishKeys(x, q, a, "boom", 1, 1)
	publishKeys(x, q, a, "stale", 1, 1)
	plain := publishKeys(x, q, a, "plain", 1, 1)
	copies := x.copies()
	x.eventually(func() bool {
		return x.DeadLetters.Count(q.Name()) >= 1 && rec.Count("stale-0") >= copies && rec.Count("plain-0") >= 2
	}, func() string {
		return fmt.Sprintf("%d dead letter(s); runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(a)
	sleep(3 * x.Caps.PollWait) // a wrong retry would show now
	if n := rec.Count("boom-0"); n != copies {
		x.T.Fatalf("the batch classified Permanent ran %d times; want once per stored copy (%d)", n, copies)
	}
	if n := rec.Count("stale-0"); n != copies {
		x.T.Fatalf("the batch classified Discard ran %d times; want once per stored copy (%d)", n, copies)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 || letters[0].Reason != core.ReasonPermanent || letters[0].Attempts != 1 {
		x.T.Fatalf("dead letters %+v; want one, reason %s after 1 attempt (the Permanent one alone)", letters, core.ReasonPermanent)
	}
	if n := onErr.Load(); n != 1 {
		x.T.Fatalf("OnError fired %d times; want once (the dead letter)", n)
	}
	if n := sumDropped(core.ReasonDiscarded, a); n < 1 {
		x.T.Fatalf("the node counts %d discarded drops; want the discarded batch counted", n)
	}
	waitDelivered(x, rec, plain)
	if bad := badRun.Load(); bad != nil {
		x.T.Fatal(bad)
	}
}
