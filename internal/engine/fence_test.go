package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// fenceCase runs one claim whose Extend fails as extend says, with a listener that waits for
// its context, and reports the cause, when it came, and the fence the listener saw.
func fenceCase(t *testing.T, extend func(ctx context.Context) error) {
	t.Helper()
	const lease = 1200 * time.Millisecond // margin 300 ms: room for a late timer on a loaded machine
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
	fb.OpFn = func(ctx context.Context, op string) error {
		if op == "Extend" {
			return extend(ctx)
		}
		return nil
	}
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	type seen struct {
		cause    error
		at       time.Time
		deadline time.Time
		ok       bool
	}
	got := make(chan seen, 1)
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		dl, ok := txmq.LeaseDeadline(ctx)
		<-ctx.Done()
		got <- seen{context.Cause(ctx), time.Now(), dl, ok}
		return ctx.Err()
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(lease)
	<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: until})
	s := <-got
	if !errors.Is(s.cause, core.ErrLeaseLost) {
		t.Fatalf("listener context cause %v, want ErrLeaseLost", s.cause)
	}
	if fence := until.Add(-core.LeaseMargin(lease)); !s.ok || !s.deadline.Equal(fence) {
		t.Fatalf("LeaseDeadline = %v, %v; want %v (LeaseUntil - LeaseMargin)", s.deadline, s.ok, fence)
	}
	if !s.at.Before(until) {
		t.Fatalf("listener cancelled %v after the lease ended; the fence must come first", s.at.Sub(until))
	}
	acked, retried, dropped := fb.Counts()
	if acked+retried+dropped != 0 || n.Stats().LeaseLost != 1 {
		t.Fatalf("acked %d retried %d dropped %d leaseLost %d; want nothing settled and one lease lost", acked, retried, dropped, n.Stats().LeaseLost)
	}
	if fb.CallCount("Extend") == 0 {
		t.Fatalf("Extend was never tried")
	}
}

// TestFenceWhenExtendFails: an Extend that keeps failing with ErrBackendUnavailable fences the
// claim before its lease ends: the listener is cancelled with ErrLeaseLost and nothing settled.
func TestFenceWhenExtendFails(t *testing.T) {
	t.Parallel()
	fenceCase(t, func(context.Context) error { return fmt.Errorf("fake: %w", core.ErrBackendUnavailable) })
}

// TestFenceWhenExtendHangs: an Extend that hangs until its context ends delays the fence not at
// all.
func TestFenceWhenExtendHangs(t *testing.T) {
	t.Parallel()
	fenceCase(t, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
}

// TestFenceMovesWithConfirmedExtensions: while Extend works, the fence moves forward and a
// listener running several leases long is acked.
func TestFenceMovesWithConfirmedExtensions(t *testing.T) {
	t.Parallel()
	// Two seconds: a loaded CI machine still confirms each extension within the second it has.
	const lease = 2 * time.Second
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	var first, last time.Time
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		first, _ = txmq.LeaseDeadline(ctx)
		select {
		case <-time.After(5 * lease / 2):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		last, _ = txmq.LeaseDeadline(ctx)
		return nil
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(lease)})
	if acked, _, _ := fb.Counts(); acked != 1 || n.Stats().LeaseLost != 0 {
		t.Fatalf("acked %d, lease lost %d; want the batch acked with no lease lost", acked, n.Stats().LeaseLost)
	}
	if !last.After(first.Add(lease)) {
		t.Fatalf("LeaseDeadline went from %v to %v over 2.5 leases; want it moved forward", first, last)
	}
}

// TestNoSettleAfterTheFence: a listener that ignores its context and reports success after its
// claim was fenced is not acked: the claim may belong to another node by then.
func TestNoSettleAfterTheFence(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
	fb.OpFn = func(_ context.Context, op string) error {
		if op == "Extend" {
			return fmt.Errorf("fake: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Listen(n, func(context.Context, []int) error { time.Sleep(2 * lease); return nil })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(lease)})
	if acked, retried, dropped := fb.Counts(); acked+retried+dropped != 0 || fb.CallCount("Ack") != 0 {
		t.Fatalf("acked %d retried %d dropped %d (Ack calls %d); want no settle after the fence", acked, retried, dropped, fb.CallCount("Ack"))
	}
}

// TestSettleRetriesWhileUnavailable: an Ack failing twice with ErrBackendUnavailable is tried a
// third time and lands.
func TestSettleRetriesWhileUnavailable(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { return nil }, nil)
	var fails atomic.Int32
	pc.fb.OpFn = func(_ context.Context, op string) error {
		if op == "Ack" && fails.Add(1) <= 2 {
			return fmt.Errorf("fake: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	pc.deliver(batchBody(t, 0, "1"), 1)
	if acked, _, _ := pc.fb.Counts(); acked != 1 || pc.fb.CallCount("Ack") != 3 {
		t.Fatalf("acked %d after %d Ack calls; want acked on the third", acked, pc.fb.CallCount("Ack"))
	}
}

// TestTerminalOncePerBatchID: a batch whose Drop keeps failing comes back after its lease; this
// node recognises its id and drops it again without a second dead letter or OnError, and a
// node that did not see it first is stopped by the sink's ErrAlreadyDeadLettered.
func TestTerminalOncePerBatchID(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { return errors.New("boom") }, nil)
	pc.fb.OpFn = func(_ context.Context, op string) error {
		if op == "Drop" {
			return fmt.Errorf("fake: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	body := batchBody(t, 2, "1") // run 3 of 3
	pc.deliver(body, 1)
	if pc.onError.Load() != 1 || len(pc.sink.Got) != 1 || pc.fb.CallCount("Drop") != engine.SettleAttempts {
		t.Fatalf("onError %d dead letters %d Drop calls %d; want 1, 1, %d", pc.onError.Load(), len(pc.sink.Got), pc.fb.CallCount("Drop"), engine.SettleAttempts)
	}
	pc.fb.OpFn = nil
	pc.deliver(body, 2) // back after the lease: judged worker_lost, same batch id
	if pc.onError.Load() != 1 || len(pc.sink.Got) != 1 || len(pc.fb.Dropped) != 1 {
		t.Fatalf("after the comeback: onError %d dead letters %d dropped %d; want 1, 1, 1", pc.onError.Load(), len(pc.sink.Got), len(pc.fb.Dropped))
	}
	if r := pc.sink.Got[0].Reason; r != core.ReasonDeliveryExhausted {
		t.Fatalf("dead letter reason %q, want %q", r, core.ReasonDeliveryExhausted)
	}
	if d := pc.n.Stats().Dropped[core.ReasonWorkerLost]; d != 0 {
		t.Fatalf("the comeback was counted as a new drop (worker_lost %d)", d)
	}

	// Another node, whose sink already holds the batch.
	other := newPolicyCase(t, func(context.Context, []int) error { return errors.New("boom") }, nil)
	other.sink.Err = fmt.Errorf("sink: %w", core.ErrAlreadyDeadLettered)
	other.deliver(body, 2)
	if other.onError.Load() != 0 || len(other.fb.Dropped) != 1 || other.n.Stats().Dropped[core.ReasonDeadLetterFailed] != 0 {
		t.Fatalf("second node: onError %d dropped %d dead_letter_failed %d; want 0, 1, 0", other.onError.Load(), len(other.fb.Dropped), other.n.Stats().Dropped[core.ReasonDeadLetterFailed])
	}
}

// TestCloseWithDoneContextStillFlushes: Close with a ctx already done (the usual
// `<-ctx.Done(); node.Close(ctx)`) still publishes every buffered message, and a backend that
// hangs is bounded by CloseFlushTimeout, after which the batch goes to the outbox.
func TestCloseWithDoneContextStillFlushes(t *testing.T) {
	t.Parallel()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	t.Run("published", func(t *testing.T) {
		t.Parallel()
		n, fb := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
		fb.PublishFn = func(ctx context.Context, _ core.OutgoingBatch) error { return ctx.Err() } // as a real client does
		q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
		for i := range 10 {
			if err := q.Publish(context.Background(), n, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(done); err != nil {
			t.Fatalf("Close: %v", err)
		}
		got := 0
		for _, b := range fb.Batches() {
			got += b.Messages
		}
		if st := n.Stats(); got != 10 || len(st.Dropped) != 0 {
			t.Fatalf("stored %d of 10 messages, dropped %v", got, st.Dropped)
		}
	})
	t.Run("hung backend handed off", func(t *testing.T) {
		t.Parallel()
		h := &handoffRecorder{}
		n, fb := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, Handoff: h, CloseFlushTimeout: 200 * time.Millisecond})
		fb.PublishFn = func(ctx context.Context, _ core.OutgoingBatch) error { <-ctx.Done(); return ctx.Err() }
		q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
		_ = q.Publish(context.Background(), n, 1)
		start := time.Now()
		_ = n.Close(done)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Close took %v; CloseFlushTimeout is 200ms", took)
		}
		if st := n.Stats(); st.HandedOff != 1 || len(st.Dropped) != 0 {
			t.Fatalf("handed off %d, dropped %v; want the batch in the outbox", st.HandedOff, st.Dropped)
		}
	})
}

// TestClaimArrivingPastItsFence: a claim handed over with less than the margin left runs only
// if an extension confirms it first.
func TestClaimArrivingPastItsFence(t *testing.T) {
	t.Parallel()
	const lease = 400 * time.Millisecond
	for _, tc := range []struct {
		name    string
		extend  error
		wantRun bool
	}{
		{"extended", nil, true},
		{"extension fails", fmt.Errorf("fake: %w", core.ErrBackendUnavailable), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
			fb.OpFn = func(_ context.Context, op string) error {
				if op == "Extend" {
					return tc.extend
				}
				return nil
			}
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
			var ran atomic.Bool
			_ = q.Listen(n, func(context.Context, []int) error { ran.Store(true); return nil })
			until := time.Now().Add(core.LeaseMargin(lease) / 2)
			<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: until})
			acked, _, _ := fb.Counts()
			if ran.Load() != tc.wantRun || (acked == 1) != tc.wantRun {
				t.Fatalf("ran %v acked %d; want run and ack %v", ran.Load(), acked, tc.wantRun)
			}
		})
	}
}

// TestFenceWithALongerBackendLease: a backend that grants more than the node's lease (a
// JetStream AckWait set by another client) still gets extended on the node's own schedule: the
// fence follows what the node can vouch for (start of the call + its lease), and the listener
// keeps running.
func TestFenceWithALongerBackendLease(t *testing.T) {
	t.Parallel()
	// Two seconds: a loaded CI machine still confirms each extension within the second it has.
	const lease = 2 * time.Second
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
	fb.Granted = 10 * lease
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		select {
		case <-time.After(5 * lease / 2):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(lease)})
	if acked, _, _ := fb.Counts(); acked != 1 || n.Stats().LeaseLost != 0 {
		t.Fatalf("acked %d, lease lost %d; want the batch acked with no lease lost", acked, n.Stats().LeaseLost)
	}
}

// TestStepBackAfterLostLease: a node that lost a lease of a queue leaves the queue out of its
// fetches for one lease, so that a node which cannot keep its leases does not keep claiming
// the batch back from healthy ones; then it asks for the queue again.
func TestStepBackAfterLostLease(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, &txmq.NodeOptions{Lease: 200 * time.Millisecond})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, Exclusive: true})
	if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	asks := func() bool {
		for _, s := range engine.Of(n).FetchRequest(time.Now()).Queues {
			if s.Queue == "q" {
				return true
			}
		}
		return false
	}
	if !asks() {
		t.Fatal("the queue is not fetched at first")
	}
	engine.Of(n).StepBack("q")
	if asks() {
		t.Fatal("the queue is fetched right after a lost lease")
	}
	time.Sleep(250 * time.Millisecond)
	if !asks() {
		t.Fatal("the queue is still left out one lease after the lost lease")
	}
}

// TestCloseFlushOutlastsItsTimeoutWhileTheBackendAccepts: Close's final flush writes every
// buffered batch while the backend accepts them, even when the whole flush takes longer than
// CloseFlushTimeout (which bounds each write): a large buffer on a healthy, slow backend loses
// nothing (no outbox here, so anything not written would be dropped).
func TestCloseFlushOutlastsItsTimeoutWhileTheBackendAccepts(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, CloseFlushTimeout: 100 * time.Millisecond})
	fb.PublishFn = func(ctx context.Context, _ core.OutgoingBatch) error {
		select {
		case <-time.After(20 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 1})
	const total = 80 // 80 writes of 20 ms, 8 at a time: about 200 ms, twice the timeout
	for i := range total {
		if err := q.Publish(context.Background(), n, i); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Close(ctx)
	if got := len(fb.Batches()); got != total {
		t.Fatalf("%d of %d batches stored; dropped %v", got, total, n.Stats().Dropped)
	}
}

// total is how many one-message batches hungBufferedNode publishes.
const total = 100

// hungBufferedNode returns a node with opts on a backend whose every Publish hangs until its
// ctx ends (counted in writes), after publishing total one-message batches of queue "q".
func hungBufferedNode(t *testing.T, opts *txmq.NodeOptions) (*txmq.Node, *atomic.Int64) {
	t.Helper()
	n, fb := newTestNode(t, opts)
	writes := new(atomic.Int64)
	fb.PublishFn = func(ctx context.Context, _ core.OutgoingBatch) error {
		writes.Add(1)
		<-ctx.Done() // the backend hangs
		return ctx.Err()
	}
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 1})
	for i := range total {
		if err := q.Publish(context.Background(), n, i); err != nil {
			t.Fatal(err)
		}
	}
	return n, writes
}

// TestCloseFlushHandsOffTheRestOnceAWriteFails: once a write of Close's final flush fails, the
// batches not written yet go to the outbox at once instead of each waiting for the backend.
func TestCloseFlushHandsOffTheRestOnceAWriteFails(t *testing.T) {
	t.Parallel()
	h := &handoffRecorder{}
	n, writes := hungBufferedNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, CloseFlushTimeout: 200 * time.Millisecond, Handoff: h})
	start := time.Now()
	_ = n.Close(context.Background())
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a hung backend; want about one CloseFlushTimeout", took)
	}
	h.Mu.Lock()
	got := len(h.Got)
	h.Mu.Unlock()
	if got != total || len(n.Stats().Dropped) != 0 {
		t.Fatalf("%d of %d batches handed off, dropped %v", got, total, n.Stats().Dropped)
	}
	if w := writes.Load(); w > 2*engine.FlushConcurrency {
		t.Fatalf("%d writes tried on a hung backend; want the rest handed off without trying", w)
	}
}

// TestCloseBoundsAFlushInProgress: a regular flush already waiting on a hung backend when
// Close begins is bounded like Close's final flush (its writes get CloseFlushTimeout, not
// ClaimTimeout, and once one failed the rest go to the outbox without trying), so Close with a
// hung backend takes about one CloseFlushTimeout whatever the flusher was doing.
func TestCloseBoundsAFlushInProgress(t *testing.T) {
	t.Parallel()
	h := &handoffRecorder{}
	n, writes := hungBufferedNode(t, &txmq.NodeOptions{FlushWindow: time.Millisecond, FlushCap: time.Millisecond,
		ClaimTimeout: time.Minute, CloseFlushTimeout: 200 * time.Millisecond, Handoff: h})
	waitFor(t, "the flusher's writes wait on the backend", func() bool { return writes.Load() > 0 })
	start := time.Now()
	_ = n.Close(context.Background())
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a flush in progress on a hung backend; want about one CloseFlushTimeout", took)
	}
	h.Mu.Lock()
	got := len(h.Got)
	h.Mu.Unlock()
	if got != total || len(n.Stats().Dropped) != 0 {
		t.Fatalf("%d of %d batches handed off, dropped %v", got, total, n.Stats().Dropped)
	}
	if w := writes.Load(); w > 3*engine.FlushConcurrency {
		t.Fatalf("%d writes tried on a hung backend; want the rest handed off without trying", w)
	}
}

// TestLateClaimGivenBack: a claim that reaches its worker past its fence, its lease not yet
// over and its extension failing, is not run and is given back at once (Retry, no delay) with
// its attempt count unchanged: a delivery the listener never saw spends no run, so a batch is
// never dead-lettered for runs that did not happen. A claim whose lease already ended is left
// to come back after it (the backend refuses any call on it).
func TestLateClaimGivenBack(t *testing.T) {
	t.Parallel()
	const lease = 4 * time.Second // margin 1 s: the claim below is 500 ms inside it
	for _, tt := range []struct {
		name      string
		untilIn   time.Duration
		wantRetry int
	}{
		{"inside_the_margin", 500 * time.Millisecond, 1},
		{"lease_over", -time.Second, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, fb := newTestNode(t, &txmq.NodeOptions{Lease: lease})
			fb.ExtendErr = fmt.Errorf("fake: %w", core.ErrBackendUnavailable)
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
			var ran atomic.Int32
			_ = q.Listen(n, func(context.Context, []int) error { ran.Add(1); return nil })
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			body := batchBody(t, 2, "1")
			<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: body, Deliveries: 1, LeaseUntil: time.Now().Add(tt.untilIn)})
			acked, retried, dropped := fb.Counts()
			if ran.Load() != 0 || acked+dropped != 0 || retried != tt.wantRetry || n.Stats().LeaseLost != 1 {
				t.Fatalf("ran %d, acked %d retried %d dropped %d, lease lost %d; want not run, %d given back, one lease lost",
					ran.Load(), acked, retried, dropped, n.Stats().LeaseLost, tt.wantRetry)
			}
			if tt.wantRetry == 1 {
				r := fb.Retried[0]
				if r.Delay != 0 || string(r.Body) != string(body) {
					t.Fatalf("given back with delay %v and a changed body; want at once, attempt count unchanged", r.Delay)
				}
			}
		})
	}
}
