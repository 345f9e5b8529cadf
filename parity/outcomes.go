package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

func init() {
	register("outcomes",
		property{name: "mixed_batch_each_path", dup: true, run: mixedOutcomes},
		property{name: "whole_batch_snooze_and_discard", run: wholeBatchMarks},
		property{name: "snooze_bounded", run: snoozeBounded},
		property{name: "ordered_retry_holds_key", run: orderedRetryHoldsKey},
	)
}

// onErrorLog records the OnError calls of a queue: the keys of each call's messages, with its
// error and attempts.
type onErrorLog struct {
	mu    sync.Mutex
	calls []string
}

func (o *onErrorLog) fn(msgs []Msg, err error, attempts int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, fmt.Sprintf("%s@%d:%v", batchSig(msgs), attempts, err))
	return nil
}

func (o *onErrorLog) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append([]string(nil), o.calls...)
	sort.Strings(out)
	return out
}

// steadyLease is the node options of the properties that count runs exactly (outcomes, the
// policy's budget and Permanent): a lease ten times the suite's, so that a loaded machine
// rarely fences a run (which runs its batch again, as at-least-once allows) and blurs their
// exact run and dead-letter counts (checkRuns allows a run per lease lost all the same). A
// lost lease is its own group's concern (leases, faults).
func (x *X) steadyLease() txmq.NodeOptions { return txmq.NodeOptions{Lease: 10 * x.Caps.Lease} }

// keysOf returns the message keys of an encoded batch, in order.
func keysOf(body []byte) []string {
	env, err := envelope.Decode(body)
	if err != nil {
		return []string{"undecodable: " + err.Error()}
	}
	var keys []string
	for _, m := range env.Messages {
		var v struct {
			K string `json:"k"`
		}
		_ = json.Unmarshal(m, &v)
		keys = append(keys, v.K)
	}
	return keys
}

// mixedOutcomes: a batch of five messages reports one outcome each (done, retry, snooze, drop,
// discard). The done and discarded ones never run again; the dropped one is dead-lettered at
// once (reason permanent, that message alone, OnError once with it); the retried one spends its
// budget (MaxAttempts runs, then one delivery_exhausted dead letter with it alone, OnError
// once); the snoozed one runs past the budget (snoozes are not runs). Under duplicate delivery
// the dead letters and OnError calls are still one per derived batch id, and the done,
// discarded and dropped messages run once per stored copy.
func mixedOutcomes(x *X) {
	const budget = 3
	const snoozeRuns = budget + 1 // runs of the snoozed message: more than the budget
	var onErr onErrorLog
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, MaxBatchMessages: 5, OnError: onErr.fn,
		Backoff: func(int) time.Duration { return 20 * time.Millisecond }})
	rec := newRecorder()
	role := func(m Msg) string { return m.K[strings.LastIndexByte(m.K, '-')+1:] }
	fn := func(ctx context.Context, msgs []Msg) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			switch role(m) {
			case "retry":
				res.Retry(i, errBoom)
			case "snooze":
				if rec.Count(m.K) < snoozeRuns {
					res.Snooze(i, 50*time.Millisecond)
				}
			case "drop":
				res.Drop(i, fmt.Errorf("bad card: %w", errBoom))
			case "discard":
				res.Discard(i, "duplicate order")
			}
		}
		return res.Err()
	}
	a, b := x.node(x.steadyLease()), x.node(x.steadyLease())
	listen(x, rec, q, a, fn)
	listen(x, rec, q, b, fn)
	p := q.Name()
	keys := []string{p + "-done", p + "-retry", p + "-snooze", p + "-drop", p + "-discard"}
	msgs := make([]Msg, len(keys))
	for i, k := range keys {
		msgs[i] = Msg{K: k}
	}
	if err := q.PublishMany(context.Background(), a, msgs); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	copies := x.copies()
	x.eventually(func() bool {
		return x.DeadLetters.Count(q.Name()) >= 2 && rec.Count(keys[2]) >= snoozeRuns && rec.Count(keys[1]) >= budget
	}, func() string {
		return fmt.Sprintf("%d dead letter(s) of 2; runs so far: %s", x.DeadLetters.Count(q.Name()), rec.Summary())
	})
	x.idle(a, b)
	sleep(3 * x.Caps.PollWait) // a wrong redelivery would show now
	x.idle(a, b)
	for _, k := range []string{keys[0], keys[3], keys[4]} {
		if got := rec.Count(k); got != copies {
			x.T.Errorf("message %s ran %d times; want once per stored copy (%d)", k, got, copies)
		}
	}
	if got := rec.Count(keys[1]); copies == 1 && got != budget || got < budget {
		x.T.Errorf("retried message ran %d times; want exactly MaxAttempts=%d per stored copy", got, budget)
	}
	if got := rec.Count(keys[2]); copies == 1 && got != snoozeRuns || got < snoozeRuns {
		x.T.Errorf("snoozed message ran %d times; want %d (snoozes do not spend the budget of %d)", got, snoozeRuns, budget)
	}
	letters := x.DeadLetters.Letters()
	reasons := map[string][]string{}
	for _, l := range letters {
		reasons[l.Reason] = append(reasons[l.Reason], strings.Join(keysOf(l.Body), ","))
		if l.Messages != 1 {
			x.T.Errorf("dead letter %s (%s) holds %d messages; want 1", l.BatchID, l.Reason, l.Messages)
		}
	}
	if len(letters) != 2 || fmt.Sprint(reasons[core.ReasonPermanent]) != "["+keys[3]+"]" || fmt.Sprint(reasons[core.ReasonDeliveryExhausted]) != "["+keys[1]+"]" {
		x.T.Fatalf("dead letters by reason %v; want one permanent [%s] and one delivery_exhausted [%s]", reasons, keys[3], keys[1])
	}
	calls := onErr.list()
	want := []string{fmt.Sprintf("%s@%d:%v", keys[1], budget, errBoom), fmt.Sprintf("%s@1:bad card: %v", keys[3], errBoom)}
	sort.Strings(want)
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		x.T.Fatalf("OnError calls %q; want %q (once per dropped message, with its own error)", calls, want)
	}
	if got := sumDropped(core.ReasonPermanent, a, b); got != 1 {
		x.T.Errorf("nodes count %d permanent drops; want 1", got)
	}
	if got := sumDropped(core.ReasonDeliveryExhausted, a, b); got != 1 {
		x.T.Errorf("nodes count %d delivery_exhausted drops; want 1", got)
	}
	if got := sumDropped(core.ReasonDiscarded, a, b); got != int64(copies) {
		x.T.Errorf("nodes count %d discards; want one per stored copy's run (%d)", got, copies)
	}
	if got := a.Stats().Snoozed + b.Stats().Snoozed; got < snoozeRuns-1 {
		x.T.Errorf("nodes count %d snoozes; want at least %d", got, snoozeRuns-1)
	}
}

// wholeBatchMarks: txmq.Snooze(d) returned by a one-message listener runs the batch again
// after d without spending the budget (a budget of 1 and three runs), never before d; and
// txmq.Discard(reason) ends a batch after one run without a dead letter, counted.
func wholeBatchMarks(x *X) {
	const d = 300 * time.Millisecond
	sq := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1})
	dq := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1})
	rec, runs := newRecorder(), &runStarts{}
	n := x.node(x.steadyLease())
	listen(x, rec, sq, n, runs.listener(2, func(int) error { return txmq.Snooze(d) }))
	listen(x, rec, dq, n, func(context.Context, []Msg) error { return txmq.Discard("stale") })
	publishKeys(x, sq, n, sq.Name(), 1, 1)
	publishKeys(x, dq, n, dq.Name(), 1, 1)
	x.eventually(func() bool { return runs.count() >= 3 && rec.Has(dq.Name()+"-0") }, func() string {
		return fmt.Sprintf("three runs of the snoozed batch and one of the discarded one: %s", rec.Summary())
	})
	x.idle(n)
	sleep(3 * x.Caps.PollWait)
	x.idle(n)
	if got := runs.count(); got != 3 {
		x.T.Errorf("snoozed batch ran %d times; want 3 (two snoozes, then done) with a budget of 1", got)
	}
	for i, g := range runs.gaps() {
		if g < d-backendClockStep {
			x.T.Errorf("run %d came %v after the snooze of %v: early", i+2, g, d)
		}
	}
	if got := rec.Count(dq.Name() + "-0"); got != 1 {
		x.T.Errorf("discarded batch ran %d times; want 1", got)
	}
	if got := x.DeadLetters.Count(sq.Name()) + x.DeadLetters.Count(dq.Name()); got != 0 {
		x.T.Errorf("%d dead letters; want none", got)
	}
	if got := sumDropped(core.ReasonDiscarded, n); got != 1 {
		x.T.Errorf("node counts %d discards; want 1", got)
	}
	if got := n.Stats().Snoozed; got != 2 {
		x.T.Errorf("node counts %d snoozes; want 2", got)
	}
}

// snoozeBounded: a listener that always snoozes is dead-lettered once its queue's MaxSnoozes is
// spent (reason snooze_exhausted, OnError once), after MaxSnoozes+1 runs.
func snoozeBounded(x *X) {
	const maxSnoozes = 2
	var onErr onErrorLog
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1, MaxSnoozes: maxSnoozes, OnError: onErr.fn})
	rec := newRecorder()
	n := x.node(x.steadyLease())
	listen(x, rec, q, n, func(context.Context, []Msg) error { return txmq.Snooze(10 * time.Millisecond) })
	publishKeys(x, q, n, q.Name(), 1, 1)
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 }, func() string {
		return fmt.Sprintf("the endless snooze dead-lettered: %s", rec.Summary())
	})
	x.idle(n)
	sleep(3 * x.Caps.PollWait)
	x.idle(n)
	if got := rec.Runs(); got != maxSnoozes+1 {
		x.T.Errorf("listener ran %d times; want MaxSnoozes+1 = %d", got, maxSnoozes+1)
	}
	letters := x.DeadLetters.Letters()
	if len(letters) != 1 || letters[0].Reason != core.ReasonSnoozeExhausted {
		x.T.Fatalf("dead letters %+v; want one with reason %s", letters, core.ReasonSnoozeExhausted)
	}
	if calls := onErr.list(); len(calls) != 1 {
		x.T.Errorf("OnError calls %q; want one", calls)
	}
	if got := sumDropped(core.ReasonSnoozeExhausted, n); got != 1 {
		x.T.Errorf("node counts %d snooze_exhausted drops; want 1", got)
	}
}

// orderedRetryHoldsKey: on an Ordered queue, a batch of five messages of one key whose
// listener retries the message at index 2 (and marks the one after it done) keeps the key:
// messages 2..4 run again, in order, as the key's head, before any later publish of the key;
// the messages before index 2 are done (they run again only on an adapter that retries a
// keyed batch in place, keeping its old body: NATS).
func orderedRetryHoldsKey(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 5, Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	n := x.node(x.steadyLease())
	var mu sync.Mutex
	var order []string // the keys of each run, in run order
	later := make(chan struct{})
	var once sync.Once
	fn := func(ctx context.Context, msgs []Msg) error {
		mu.Lock()
		order = append(order, batchSig(msgs))
		first := len(order) == 1
		mu.Unlock()
		if !first {
			return nil
		}
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			if strings.HasSuffix(m.K, "-2") {
				res.Retry(i, errBoom)
			}
		}
		once.Do(func() { close(later) })
		return res.Err()
	}
	if err := q.Listen(n, fn); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	p := q.Name()
	var msgs []Msg
	for i := range 5 {
		msgs = append(msgs, Msg{K: fmt.Sprintf("%s-%d", p, i)})
	}
	if err := q.PublishMany(context.Background(), n, msgs, txmq.Key("acct")); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	select {
	case <-later:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("the first run did not start within %v", x.Caps.Timeout)
	}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: p + "-5"}, {K: p + "-6"}}, txmq.Key("acct")); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	seen := func(k string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(order, ","), k)
	}
	x.eventually(func() bool { return seen(p + "-6") }, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("the later publish ran; runs so far: %q", order)
	})
	x.idle(n)
	mu.Lock()
	defer mu.Unlock()
	var flat []string
	for _, s := range order {
		flat = append(flat, strings.Split(s, ",")...)
	}
	// The first run holds 0..4; then 2,3,4 (after 0,1 again on an in-place adapter) before 5,6.
	want := func(ks ...int) string {
		var s []string
		for _, k := range ks {
			s = append(s, fmt.Sprintf("%s-%d", p, k))
		}
		return strings.Join(s, ",")
	}
	got := strings.Join(flat, ",")
	if got != want(0, 1, 2, 3, 4, 2, 3, 4, 5, 6) && got != want(0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6) {
		x.T.Fatalf("runs of key acct in order: %q; want 0..4, then 2,3,4 again as the key's head, then 5,6", order)
	}
	if len(order) < 2 || !strings.HasSuffix(order[1], want(2, 3, 4)) {
		x.T.Fatalf("runs %q: the second run must be the retried head (messages 2..4 in order)", order)
	}
}
