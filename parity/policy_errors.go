package parity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("policy",
		property{name: "permanent_dead_lettered_at_once", dup: true, run: permanentDeadLettersAtOnce},
		property{name: "retry_after_never_early", run: retryAfterNeverEarly},
		property{name: "queue_backoff_overrides_node", run: queueBackoffOverridesNode},
	)
}

// countingBackoff returns a backoff of d that counts its calls in calls.
func countingBackoff(calls *atomic.Int64, d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { calls.Add(1); return d }
}

// runStarts records the start of each run and fails the first fails runs with fail(run).
type runStarts struct {
	mu     sync.Mutex
	starts []time.Time
}

func (s *runStarts) listener(fails int, fail func(run int) error) func(context.Context, []Msg) error {
	return func(context.Context, []Msg) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.starts = append(s.starts, time.Now())
		if run := len(s.starts); run <= fails {
			return fail(run)
		}
		return nil
	}
}

func (s *runStarts) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.starts) }

// gaps returns the time between each run and the one before it.
func (s *runStarts) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(s.starts); i++ {
		g = append(g, s.starts[i].Sub(s.starts[i-1]))
	}
	return g
}

// permanentDeadLettersAtOnce: a listener error marked Permanent dead-letters the batch on its
// first run with budget left: each stored copy runs once and never again, OnError fires once
// with the listener's error (errors.Is sees through the mark) and attempts 1, one dead letter
// with reason permanent, one permanent drop counted, no retry. (A run whose lease a loaded
// machine lost runs again without counting: checkRuns.)
func permanentDeadLettersAtOnce(x *X) {
	var onErr atomic.Int64
	var onErrBad atomic.Value
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 5, OnError: func(_ []Msg, err error, attempts int) error {
		onErr.Add(1)
		if !errors.Is(err, errBoom) || !core.IsPermanent(err) || attempts != 1 {
			onErrBad.Store(fmt.Sprintf("OnError got (%v, attempts %d); want the listener's Permanent error and 1", err, attempts))
		}
		return nil
	}})
	rec := newRecorder()
	fail := func(context.Context, []Msg) error { return txmq.Permanent(fmt.Errorf("charge: %w", errBoom)) }
	a, b := x.node(x.steadyLease()), x.node(x.steadyLease())
	listen(x, rec, q, a, fail)
	listen(x, rec, q, b, fail)
	publishKeys(x, q, a, "perm", 1, 1)
	copies := x.copies()
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 && rec.Runs() >= copies }, func() string {
		return fmt.Sprintf("%d dead letter(s); runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(a, b)
	sleep(3 * x.Caps.PollWait) // a wrong retry would show now
	checkRuns(x, rec.Runs(), copies, "once per stored copy (Permanent must not be retried)", a, b)
	if got := onErr.Load(); got != 1 {
		x.T.Fatalf("OnError fired %d times; want once", got)
	}
	if bad := onErrBad.Load(); bad != nil {
		x.T.Fatal(bad)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 || letters[0].Reason != core.ReasonPermanent || letters[0].Attempts != 1 {
		x.T.Fatalf("dead letters %+v; want one with reason %s and 1 attempt", letters, core.ReasonPermanent)
	}
	if got := sumDropped(core.ReasonPermanent, a, b); got != 1 {
		x.T.Fatalf("nodes count %d permanent drops; want 1", got)
	}
	if r := a.Stats().Retried + b.Stats().Retried; r != 0 {
		x.T.Fatalf("nodes report %d retries; want 0", r)
	}
}

// retryAfterNeverEarly: a listener error made with RetryAfter(d, err) delays the next run by
// at least d (to the backend clock's millisecond) and at most d plus the suite's timeout,
// and the node's Backoff is not asked.
func retryAfterNeverEarly(x *X) {
	const d = 700 * time.Millisecond
	var nodeCalls atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3})
	rec, runs := newRecorder(), &runStarts{}
	n := x.node(txmq.NodeOptions{Backoff: countingBackoff(&nodeCalls, time.Millisecond)})
	listen(x, rec, q, n, runs.listener(1, func(int) error { return txmq.RetryAfter(d, errBoom) }))
	publishKeys(x, q, n, "ra", 1, 1)
	x.eventually(func() bool { return runs.count() >= 2 }, "the run after RetryAfter")
	x.idle(n)
	gaps := runs.gaps()
	if len(gaps) != 1 {
		x.T.Fatalf("%d runs; want 2", len(gaps)+1)
	}
	if g := gaps[0]; g < d-backendClockStep || g > d+x.Caps.Timeout {
		x.T.Fatalf("the run after RetryAfter(%v) started %v later; want between %v and %v", d, g, d, d+x.Caps.Timeout)
	}
	if c := nodeCalls.Load(); c != 0 {
		x.T.Fatalf("the node's Backoff was asked %d times; RetryAfter's delay replaces it", c)
	}
}

// queueBackoffOverridesNode: a queue's Backoff decides its retry delays (never early) and
// the node's Backoff, an hour here, is never asked for that queue.
func queueBackoffOverridesNode(x *X) {
	const unit = 300 * time.Millisecond
	var nodeCalls, queueCalls atomic.Int64
	backoff := func(run int) time.Duration { queueCalls.Add(1); return time.Duration(run) * unit }
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3, Backoff: backoff})
	rec, runs := newRecorder(), &runStarts{}
	n := x.node(txmq.NodeOptions{Backoff: countingBackoff(&nodeCalls, time.Hour)})
	listen(x, rec, q, n, runs.listener(2, func(int) error { return errBoom }))
	publishKeys(x, q, n, "qb", 1, 1)
	x.eventually(func() bool { return runs.count() >= 3 }, "three runs on the queue's backoff")
	x.idle(n)
	for i, g := range runs.gaps() {
		if min := time.Duration(i+1) * unit; g < min-backendClockStep {
			x.T.Fatalf("run %d started %v after run %d; the queue's backoff is %v: retried early", i+2, g, i+1, min)
		}
	}
	if c := nodeCalls.Load(); c != 0 {
		x.T.Fatalf("the node's Backoff was asked %d times; the queue's Backoff replaces it", c)
	}
	if c := queueCalls.Load(); c != 2 {
		x.T.Fatalf("the queue's Backoff was asked %d times; want 2 (one per failed run)", c)
	}
}
