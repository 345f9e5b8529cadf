package txmqtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// End-to-end tests of core on the memory backend through the kit, each also under
// DuplicateDelivery. The parity suite (adapters/memory TestParity) covers the same ground
// and more; these are the app-developer view and the kit's own tests.

type job struct {
	ID int `json:"id"`
}

func jobKey(j job) string { return fmt.Sprint(j.ID) }

func forBoth(t *testing.T, fn func(t *testing.T, k *txmqtest.Kit, copies int)) {
	for _, dup := range []bool{false, true} {
		name, copies := "single", 1
		if dup {
			name, copies = "duplicate", 2
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: dup}), copies)
		})
	}
}

func publishJobs(t *testing.T, q *txmq.Queue[job], n *txmq.Node, from, count int, opts ...txmq.PublishOption) []string {
	t.Helper()
	var keys []string
	for i := from; i < from+count; i++ {
		if err := q.Publish(context.Background(), n, job{ID: i}, opts...); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, fmt.Sprint(i))
	}
	return keys
}

func TestDeliveredSetEqualsPublished(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		q := txmqtest.DeclareIn(k, "jobs", txmq.QueueConfig[job]{Transactional: txmq.Try, MaxBatchMessages: 10})
		rec := txmqtest.NewRecorder(jobKey)
		a, b := k.Node(nil), k.Node(nil)
		for _, n := range []*txmq.Node{a, b} {
			if err := rec.Listen(q, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		keys := publishJobs(t, q, a, 0, 300)
		k.Eventually(10*time.Second, func() bool { return rec.HasAll(keys) }, func() string { return rec.Summary() })
		k.WaitIdle(a, b)
		if missing, extra := rec.Diff(keys); len(missing)+len(extra) > 0 {
			t.Fatalf("missing %v, spurious %v", missing, extra)
		}
		if m := rec.MinCount(keys); m < copies {
			t.Fatalf("a message arrived %d times; want >= %d", m, copies)
		}
	})
}

func TestFailureLeadsToRedelivery(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		q := txmqtest.DeclareIn(k, "flaky", txmq.QueueConfig[job]{Transactional: txmq.Try, MaxAttempts: 3})
		rec, ok := txmqtest.NewRecorder(jobKey), txmqtest.NewRecorder(jobKey)
		n := k.Node(nil)
		// The first run to see a batch fails it. A duplicate copy may run at the same
		// moment, so "first" is decided here, under a lock, not by the recorder's count.
		var mu sync.Mutex
		failed := map[string]bool{}
		if err := rec.Listen(q, n, func(_ context.Context, msgs []job) error {
			mu.Lock()
			first := !failed[jobKey(msgs[0])]
			failed[jobKey(msgs[0])] = true
			mu.Unlock()
			if first {
				return errors.New("first run fails")
			}
			ok.Record(msgs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		keys := publishJobs(t, q, n, 0, 5)
		k.Eventually(10*time.Second, func() bool { return ok.HasAll(keys) }, func() string { return rec.Summary() })
		k.WaitIdle(n)
		if s := n.Stats(); s.Retried < 1 || s.Dropped[core.ReasonDeliveryExhausted] != 0 {
			t.Fatalf("stats %+v: want retries and no drops", s)
		}
		if len(k.DeadLetters.Letters()) != 0 {
			t.Fatalf("dead letters: %+v", k.DeadLetters.Letters())
		}
	})
}

func TestExhaustedBudgetDeadLetters(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		var mu sync.Mutex
		onErr := 0
		q := txmqtest.DeclareIn(k, "doomed", txmq.QueueConfig[job]{Transactional: txmq.Try, MaxAttempts: 2,
			OnError: func([]job, error, int) error { mu.Lock(); onErr++; mu.Unlock(); return nil }})
		rec := txmqtest.NewRecorder(jobKey)
		n := k.Node(nil)
		if err := rec.Listen(q, n, func(context.Context, []job) error { return errors.New("always") }); err != nil {
			t.Fatal(err)
		}
		publishJobs(t, q, n, 0, 1)
		// Each stored copy has its own budget; the terminal path runs once per batch id, which
		// a duplicate copy shares.
		k.Eventually(10*time.Second, func() bool { return k.DeadLetters.Count("doomed") == 1 && rec.Runs() >= 2*copies })
		k.WaitIdle(n)
		mu.Lock()
		defer mu.Unlock()
		if rec.Runs() != 2*copies || onErr != 1 || n.Stats().Dropped[core.ReasonDeliveryExhausted] != 1 {
			t.Fatalf("runs %d, OnError %d, dropped %v; want %d, 1, 1", rec.Runs(), onErr, n.Stats().Dropped, 2*copies)
		}
	})
}

func TestExclusiveAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		q := txmqtest.DeclareIn(k, "serial", txmq.QueueConfig[job]{Transactional: txmq.Try, Exclusive: true, MaxBatchMessages: 1})
		rec := txmqtest.NewRecorder(jobKey)
		a, b := k.Node(nil), k.Node(nil)
		for _, n := range []*txmq.Node{a, b} {
			if err := rec.Listen(q, n, func(context.Context, []job) error { time.Sleep(3 * time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		keys := publishJobs(t, q, a, 0, 20)
		k.Eventually(10*time.Second, func() bool { return rec.HasAll(keys) })
		k.WaitIdle(a, b)
		if p := rec.Peak("serial"); p != 1 {
			t.Fatalf("Exclusive peak %d; want 1", p)
		}
	})
}

func TestMaxConcurrentBatches(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		q := txmqtest.DeclareIn(k, "capped", txmq.QueueConfig[job]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(3), MaxBatchMessages: 1})
		rec := txmqtest.NewRecorder(jobKey)
		n := k.Node(nil)
		if err := rec.Listen(q, n, func(context.Context, []job) error { time.Sleep(10 * time.Millisecond); return nil }); err != nil {
			t.Fatal(err)
		}
		keys := publishJobs(t, q, n, 0, 30)
		k.Eventually(10*time.Second, func() bool { return rec.HasAll(keys) })
		k.WaitIdle(n)
		if p := rec.NodePeak("capped", n.ID()); p > 3 {
			t.Fatalf("peak %d over cap 3", p)
		}
	})
}

func TestDelayedNotEarly(t *testing.T) {
	t.Parallel()
	forBoth(t, func(t *testing.T, k *txmqtest.Kit, copies int) {
		q := txmqtest.DeclareIn(k, "later", txmq.QueueConfig[job]{Transactional: txmq.Try})
		rec := txmqtest.NewRecorder(jobKey)
		n := k.Node(nil)
		var mu sync.Mutex
		var early []string
		due := time.Now().Add(300 * time.Millisecond)
		if err := rec.Listen(q, n, func(_ context.Context, msgs []job) error {
			if time.Now().Before(due) {
				mu.Lock()
				early = append(early, fmt.Sprint(msgs))
				mu.Unlock()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		keys := publishJobs(t, q, n, 0, 3, txmq.After(300*time.Millisecond))
		k.Eventually(10*time.Second, func() bool { return rec.MinCount(keys) >= copies })
		k.WaitIdle(n)
		mu.Lock()
		defer mu.Unlock()
		if len(early) > 0 {
			t.Fatalf("delivered early: %v", early)
		}
	})
}

func TestWaitIdleSeesDelayed(t *testing.T) {
	t.Parallel()
	k := txmqtest.New(t, nil)
	q := txmqtest.DeclareIn(k, "idle", txmq.QueueConfig[job]{Transactional: txmq.Try})
	rec := txmqtest.NewRecorder(jobKey)
	n := k.Node(nil)
	if err := rec.Listen(q, n, nil); err != nil {
		t.Fatal(err)
	}
	publishJobs(t, q, n, 0, 1, txmq.After(200*time.Millisecond))
	k.WaitIdle(n) // must not return while the batch waits as delayed
	if rec.Distinct() != 1 {
		t.Fatalf("WaitIdle returned before the delayed message was delivered (%s)", rec.Summary())
	}
}

func TestDuplicateStoresTwice(t *testing.T) {
	t.Parallel()
	k := txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: true})
	q := txmqtest.DeclareIn(k, "twice", txmq.QueueConfig[job]{Transactional: txmq.Try})
	n := k.Node(nil)
	publishJobs(t, q, n, 0, 1)
	k.Eventually(5*time.Second, func() bool { return n.Stats().PublishedBatches == 1 })
	d, err := k.Memory.Depths(context.Background(), []string{"twice"})
	if err != nil {
		t.Fatal(err)
	}
	if d["twice"].Ready != 2 {
		t.Fatalf("depth %+v; want 2 ready copies", d["twice"])
	}
}

func TestRecorderPeaks(t *testing.T) {
	t.Parallel()
	rec := txmqtest.NewRecorder[string](nil)
	end1 := rec.Begin("q", "a")
	end2 := rec.Begin("q", "b")
	end3 := rec.Begin("q", "a")
	end3()
	end3() // idempotent
	rec.Record("x", "x", "y")
	if rec.Peak("q") != 3 || rec.NodePeak("q", "a") != 2 || rec.NodePeak("q", "b") != 1 {
		t.Fatalf("peaks %d %d %d", rec.Peak("q"), rec.NodePeak("q", "a"), rec.NodePeak("q", "b"))
	}
	end1()
	end2()
	rec.ResetPeaks()
	if rec.Peak("q") != 0 || rec.Distinct() != 2 || rec.Duplicates() != 1 || rec.Count(`"x"`) != 2 {
		t.Fatalf("after reset: peak %d, distinct %d, dups %d", rec.Peak("q"), rec.Distinct(), rec.Duplicates())
	}
	if missing, extra := rec.Diff([]string{`"x"`, `"z"`}); len(missing) != 1 || len(extra) != 1 {
		t.Fatalf("diff %v %v", missing, extra)
	}
}
