package parity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("timeouts",
		property{name: "hung_listener_slot_back", run: hungSlotBack},
		property{name: "exclusive_never_two_runs", run: timeoutExclusiveNoOverlap},
		property{name: "budget_counts_timed_out_run_once", dup: true, run: timeoutBudget},
	)
}

// The run timeout and grace of the timeouts properties: short, but long enough for a listener
// to start and record its run on a loaded machine.
const (
	parityRunTimeout = 500 * time.Millisecond
	parityRunGrace   = 400 * time.Millisecond
)

// timeoutQueue declares a queue of one-message batches with the properties' run timeout,
// budget MaxAttempts, Exclusive or with a cap of one batch per node.
func timeoutQueue(x *X, budget int, exclusive bool, onError func([]Msg, error, int) error) *txmq.Queue[Msg] {
	return timeoutQueueGrace(x, budget, exclusive, onError, parityRunGrace)
}

// timeoutQueueGrace is timeoutQueue with a grace of its own.
func timeoutQueueGrace(x *X, budget int, exclusive bool, onError func([]Msg, error, int) error, grace time.Duration) *txmq.Queue[Msg] {
	cfg := txmq.QueueConfig[Msg]{MaxBatchMessages: 1, MaxAttempts: budget, RunTimeout: parityRunTimeout,
		RunTimeoutGrace: grace, Exclusive: exclusive, OnError: onError}
	if !exclusive {
		cfg.MaxConcurrentBatches = txmq.Cap(1)
	}
	return declare(x, cfg)
}

// hung returns a channel that the listeners of a property block on, ignoring their ctx (a
// hung listener), closed when the property ends.
func hung(x *X) <-chan struct{} {
	release := make(chan struct{})
	x.T.Cleanup(func() { close(release) })
	return release
}

// quickBackoff is the timeouts properties' backoff: a retry is due at once, so a run that
// overlapped a timed-out one would show.
func quickBackoff(int) time.Duration { return 20 * time.Millisecond }

// timeoutNode is a node of the timeouts properties: quickBackoff, and a long lease
// (steadyLease), so that their counts of timed-out runs are not blurred by a run whose lease
// a loaded machine lost (redelivered, or dead-lettered as worker_lost once its deliveries
// pass the budget).
func timeoutNode(x *X) *txmq.Node {
	o := x.steadyLease()
	o.Backoff = quickBackoff
	return x.node(o)
}

// hungSlotBack: a listener that hangs, ignoring its ctx, on a queue capped at one batch per
// node does not hold the slot for ever: the next batch starts within RunTimeout + grace of
// the hung run's start (plus a fetch), the hung run is counted once as timed out and once as
// stuck, and its batch runs again and succeeds, twice in all.
func hungSlotBack(x *X) {
	q := timeoutQueue(x, 3, false, nil)
	release := hung(x)
	rec := newRecorder()
	var hungRuns atomic.Int64
	var hungAt atomic.Int64
	fn := func(ctx context.Context, msgs []Msg) error {
		if msgs[0].K == "hung" && hungRuns.Add(1) == 1 {
			hungAt.Store(time.Now().UnixNano())
			<-release
		}
		return nil
	}
	a := timeoutNode(x)
	listen(x, rec, q, a, fn)
	if err := q.Publish(context.Background(), a, Msg{K: "hung"}); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	x.eventually(func() bool { return hungAt.Load() != 0 }, "the hung listener started")
	if err := q.Publish(context.Background(), a, Msg{K: "next"}); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	x.eventually(func() bool { return rec.Has("next") && rec.Count("hung") >= 2 }, func() string {
		return fmt.Sprintf("the next batch and the hung one's retry did not run; runs: %s", rec.Summary())
	})
	bound := parityRunTimeout + parityRunGrace + time.Second + x.Caps.PollWait + x.latency()
	if took := rec.FirstSeen("next").Sub(time.Unix(0, hungAt.Load())); took > bound {
		x.T.Errorf("the next batch started %v after the hung run; want the slot back within RunTimeout %v + grace %v (bound %v)", took, parityRunTimeout, parityRunGrace, bound)
	}
	x.idle(a)
	sleep(3 * x.Caps.PollWait) // a wrong redelivery would show now
	if n := rec.Count("hung"); n != 2 {
		x.T.Errorf("the hung batch ran %d times; want 2 (the timed-out run, then its retry)", n)
	}
	if s := a.Stats(); s.TimedOut != 1 || s.Stuck != 1 {
		x.T.Errorf("Stats TimedOut %d, Stuck %d; want 1 and 1", s.TimedOut, s.Stuck)
	}
}

// timeoutExclusiveNoOverlap: on an Exclusive queue listened to by two nodes, a run that hangs
// for ever and one that stops an eighth of a grace after its ctx is cancelled never overlap another
// run: an external count of live runs (from the listener's start to its return, or to its
// ctx's end for the one that never returns) never exceeds one. Each of them runs twice (the
// timed-out run, then its retry), and every batch succeeds.
func timeoutExclusiveNoOverlap(x *X) {
	// The slow run must return within its grace once its ctx ends: a loaded machine wakes it
	// late, so the grace grows with the measured latency (window) and the run's own work
	// after its ctx ends is an eighth of it.
	grace := x.window(parityRunGrace)
	q := timeoutQueueGrace(x, 3, true, nil, grace)
	release := hung(x)
	rec, ok := newRecorder(), newRecorder()
	var live, peak atomic.Int64
	enter := func() {
		n := live.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	var mu sync.Mutex
	first := map[string]bool{}
	fn := func(ctx context.Context, msgs []Msg) error {
		k := msgs[0].K
		mu.Lock()
		isFirst := !first[k]
		first[k] = true
		mu.Unlock()
		enter()
		switch {
		case k == "stuck" && isFirst:
			<-ctx.Done()
			live.Add(-1)
			<-release
			return nil
		case k == "slow" && isFirst:
			<-ctx.Done()
			time.Sleep(grace / 8)
			live.Add(-1)
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
		live.Add(-1)
		ok.Record(msgs...)
		return nil
	}
	a, b := timeoutNode(x), timeoutNode(x)
	listen(x, rec, q, a, fn)
	listen(x, rec, q, b, fn)
	keys := []string{"stuck", "slow", "n-0", "n-1", "n-2"}
	for _, k := range keys {
		if err := q.Publish(context.Background(), a, Msg{K: k}); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	waitDelivered(x, ok, keys)
	x.idle(a, b)
	sleep(3 * x.Caps.PollWait)
	if p := peak.Load(); p != 1 {
		x.T.Errorf("peak live runs of the Exclusive queue = %d; want 1 (a timed-out run overlapped the next)", p)
	}
	for _, k := range []string{"stuck", "slow"} {
		if n := rec.Count(k); n != 2 {
			x.T.Errorf("batch %s ran %d times; want 2 (the timed-out run, then its retry)", k, n)
		}
	}
	sa, sb := a.Stats(), b.Stats()
	if to, st := sa.TimedOut+sb.TimedOut, sa.Stuck+sb.Stuck; to != 2 || st != 1 {
		x.T.Errorf("nodes count %d timed-out and %d stuck runs; want 2 and 1", to, st)
	}
}

// timeoutBudget: a listener that always hangs, ignoring its ctx, runs exactly MaxAttempts
// times per stored copy (each timed-out run counted once), then its batch is dead-lettered
// once, delivery_exhausted after MaxAttempts attempts, with an error saying the run timed out,
// and OnError fires once with an error wrapping ErrRunTimeout.
func timeoutBudget(x *X) {
	const budget = 2
	var onErr atomic.Int64
	var onErrBad atomic.Value
	q := timeoutQueue(x, budget, false, func(_ []Msg, err error, attempts int) error {
		onErr.Add(1)
		if !errors.Is(err, txmq.ErrRunTimeout) || attempts != budget {
			onErrBad.Store(fmt.Sprintf("OnError got (%v, %d); want an error wrapping ErrRunTimeout and %d attempts", err, attempts, budget))
		}
		return nil
	})
	release := hung(x)
	rec := newRecorder()
	a := timeoutNode(x)
	listen(x, rec, q, a, func(context.Context, []Msg) error { <-release; return nil })
	publishKeys(x, q, a, "hangs", 1, 1)
	copies := x.copies()
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 && rec.Runs() >= budget*copies }, func() string {
		return fmt.Sprintf("%d dead letter(s); runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(a)
	sleep(3 * x.Caps.PollWait) // a wrong redelivery would show now
	checkRuns(x, rec.Runs(), budget*copies, fmt.Sprintf("exactly MaxAttempts=%d per stored copy (%d copies), hung each time", budget, copies), a)
	if got := onErr.Load(); got != 1 {
		x.T.Errorf("OnError fired %d times; want once", got)
	}
	if bad, _ := onErrBad.Load().(string); bad != "" {
		x.T.Error(bad)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 {
		x.T.Fatalf("%d dead letters; want 1", len(letters))
	}
	if l := letters[0]; l.Reason != core.ReasonDeliveryExhausted || l.Attempts != budget || !strings.Contains(l.Error, core.ErrRunTimeout.Error()) {
		x.T.Errorf("dead letter: reason %s after %d attempts, error %q; want %s after %d, an error saying the run timed out", l.Reason, l.Attempts, l.Error, core.ReasonDeliveryExhausted, budget)
	}
	if s := a.Stats(); s.Stuck != int64(budget*copies) {
		x.T.Errorf("Stats Stuck %d; want %d (one per run)", s.Stuck, budget*copies)
	}
}
