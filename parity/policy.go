package parity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

func init() {
	register("policy",
		property{name: "failed_batch_redelivered", dup: true, run: failedBatchIsRedelivered},
		property{name: "exhausted_budget_dead_lettered_once", dup: true, run: exhaustedBudget},
		property{name: "retries_respect_backoff", run: retriesRespectBackoff},
		property{name: "poison_worker_lost_dead_lettered", run: poisonWorkerLost},
	)
}

var errBoom = errors.New("parity: listener failure")

func batchSig(msgs []Msg) string {
	ks := make([]string, len(msgs))
	for i, m := range msgs {
		ks[i] = m.K
	}
	return strings.Join(ks, ",")
}

// failedBatchIsRedelivered: every batch fails on its first run and succeeds on a later one;
// every message ends up processed, and ran at least twice.
func failedBatchIsRedelivered(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 5})
	rec, ok := newRecorder(), newRecorder()
	var mu sync.Mutex
	failed := map[string]bool{}
	fn := func(_ context.Context, msgs []Msg) error {
		sig := batchSig(msgs)
		mu.Lock()
		first := !failed[sig]
		failed[sig] = true
		mu.Unlock()
		if first {
			return errBoom
		}
		ok.Record(msgs...)
		return nil
	}
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, fn)
	listen(x, rec, q, b, fn)
	keys := publishKeys(x, q, a, "r", 40, 5)
	waitDelivered(x, ok, keys)
	x.idle(a, b)
	assertSame(x, ok, keys)
	if got := rec.MinCount(keys); got < 2 {
		x.T.Fatalf("a message ran %d time(s); every batch failed once, so each should have run at least twice", got)
	}
	if r := a.Stats().Retried + b.Stats().Retried; r < 1 {
		x.T.Fatalf("nodes report %d retries", r)
	}
}

// exhaustedBudget: an always-failing batch runs exactly MaxAttempts times (per stored copy
// under Dup: each copy has its own budget), then OnError fires once, it reaches the dead-letter
// sink once, and the nodes count one delivery_exhausted drop: the terminal path runs once per
// batch id, and a duplicate copy carries the same batch id; it never runs again. (A run whose
// lease a loaded machine lost runs again without spending an attempt: checkRuns.)
func exhaustedBudget(x *X) {
	const budget = 3
	var onErr atomic.Int64
	var onErrAttempts sync.Map
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, OnError: func(msgs []Msg, err error, attempts int) error {
		onErr.Add(1)
		onErrAttempts.Store(onErr.Load(), attempts)
		if !errors.Is(err, errBoom) {
			return fmt.Errorf("OnError got %v, want the listener's error", err)
		}
		return nil
	}})
	rec := newRecorder()
	fail := func(context.Context, []Msg) error { return errBoom }
	a, b := x.node(x.steadyLease()), x.node(x.steadyLease())
	listen(x, rec, q, a, fail)
	listen(x, rec, q, b, fail)
	publishKeys(x, q, a, "doomed", 1, 1)
	copies, want := x.copies(), 1
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= want && rec.Runs() >= budget*copies }, func() string {
		return fmt.Sprintf("%d dead letter(s); runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(a, b)
	sleep(3 * x.Caps.PollWait) // a wrong redelivery would show now
	checkRuns(x, rec.Runs(), budget*copies, fmt.Sprintf("exactly MaxAttempts=%d per stored copy (%d copies)", budget, copies), a, b)
	if got := onErr.Load(); got != int64(want) {
		x.T.Fatalf("OnError fired %d times; want once per batch id (%d)", got, want)
	}
	onErrAttempts.Range(func(k, v any) bool {
		if v.(int) != budget {
			x.T.Errorf("OnError got attempts=%d, want %d", v, budget)
		}
		return true
	})
	letters := x.DeadLetters.Letters()
	if len(letters) != want {
		x.T.Fatalf("%d dead letters; want %d", len(letters), want)
	}
	for _, l := range letters {
		if l.Reason != core.ReasonDeliveryExhausted || l.Attempts != budget || l.Messages != 1 || l.Queue != q.Name() {
			x.T.Errorf("dead letter %+v: want reason %s, %d attempts, 1 message, queue %s", l, core.ReasonDeliveryExhausted, budget, q.Name())
		}
		if env, err := envelope.Decode(l.Body); err != nil || env.Queue != q.Name() || len(env.Messages) != 1 {
			x.T.Errorf("dead letter body is not the batch: %v", err)
		}
	}
	if got := sumDropped(core.ReasonDeliveryExhausted, a, b); got != int64(want) {
		x.T.Fatalf("nodes count %d delivery_exhausted drops; want %d", got, want)
	}
}

// backendClockStep is the resolution of a backend's clock: Redis scripts read TIME to the
// millisecond (and keep due times in milliseconds), so a retry due "600 ms after" a Retry made
// at 12.3456 s is due at 12.945 s, up to a millisecond before 600 ms of the test's clock.
const backendClockStep = time.Millisecond

// retriesRespectBackoff: the gap between a failed run and the next run is at least the
// backoff the engine asked for (never early, to the backend clock's millisecond).
func retriesRespectBackoff(x *X) {
	const unit = 300 * time.Millisecond
	backoff := func(run int) time.Duration { return time.Duration(run) * unit }
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3})
	rec := newRecorder()
	var mu sync.Mutex
	var starts []time.Time
	n := x.node(txmq.NodeOptions{Backoff: backoff})
	listen(x, rec, q, n, func(context.Context, []Msg) error {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		if len(starts) < 3 {
			return errBoom
		}
		return nil
	})
	publishKeys(x, q, n, "b", 1, 1)
	x.eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 3 }, "three runs")
	x.idle(n)
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts); i++ {
		gap, min := starts[i].Sub(starts[i-1]), backoff(i)
		if gap < min-backendClockStep {
			x.T.Fatalf("run %d started %v after run %d; the backoff after run %d is %v: retried early", i+1, gap, i, i, min)
		}
	}
	if len(starts) != 3 {
		x.T.Fatalf("%d runs; want 3", len(starts))
	}
}

// poisonWorkerLost: a batch whose node dies every time it runs it is dead-lettered with
// reason worker_lost once the budget is spent, and is not redelivered again.
func poisonWorkerLost(x *X) {
	const budget = 2
	var onErr atomic.Int64
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, OnError: func(_ []Msg, err error, _ int) error {
		onErr.Add(1)
		return nil
	}})
	rec := newRecorder()
	started := make(chan struct{}, 16)
	poison := func(ctx context.Context, _ []Msg) error {
		started <- struct{}{}
		<-ctx.Done() // the node is halted from the test goroutine
		return ctx.Err()
	}
	pub := x.node(txmq.NodeOptions{})
	publishKeys(x, q, pub, "poison", 1, 1)
	for i := range budget {
		n := x.node(txmq.NodeOptions{})
		listen(x, rec, q, n, poison)
		select {
		case <-started:
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("run %d did not start within %v (%s)", i+1, x.Caps.Timeout, rec.Summary())
		}
		txmqtest.Halt(n) // dies holding the batch: no settle
	}
	last := x.node(txmq.NodeOptions{})
	listen(x, rec, q, last, poison)
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 }, func() string {
		return fmt.Sprintf("the poison batch dead-lettered (%s)", rec.Summary())
	})
	x.idle(last, pub)
	if got := rec.Runs(); got != budget {
		x.T.Fatalf("the poison batch ran %d times; want %d (the budget), then dead-lettered without running", got, budget)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 || letters[0].Reason != core.ReasonWorkerLost {
		x.T.Fatalf("dead letters %+v; want one with reason %s", letters, core.ReasonWorkerLost)
	}
	if got := last.Stats().Dropped[core.ReasonWorkerLost]; got != 1 {
		x.T.Fatalf("node counts %d worker_lost drops; want 1", got)
	}
	if got := onErr.Load(); got != 1 {
		x.T.Fatalf("OnError fired %d times; want 1", got)
	}
}
