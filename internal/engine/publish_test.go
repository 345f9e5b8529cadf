package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

func TestRoutingTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode       txmq.Transactional
		inTx       bool
		noCommit   bool
		wantErr    error
		wantStaged bool
		wantHeld   bool // waits for commit
		wantBuffer bool
	}{
		{mode: txmq.Require, inTx: true, wantStaged: true},
		{mode: txmq.Require, inTx: false, wantErr: core.ErrNoTransaction},
		{mode: txmq.Try, inTx: true, wantStaged: true},
		{mode: txmq.Try, inTx: false, wantBuffer: true},
		{mode: txmq.Never, inTx: true, wantHeld: true},
		{mode: txmq.Never, inTx: true, noCommit: true, wantErr: core.ErrInvalidConfig},
		{mode: txmq.Never, inTx: false, wantBuffer: true},
	}
	for _, tt := range tests {
		name := tt.mode.String()
		if tt.inTx {
			name += "/in-tx"
		}
		if tt.noCommit {
			name += "/app-managed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n, _ := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
			q, err := txmq.DeclareIn(n.Registry(), "q", txmq.QueueConfig[string]{Transactional: tt.mode})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			tx := &fakeTx{NoCommit: tt.noCommit}
			if tt.inTx {
				ctx = core.ContextWithTx(ctx, tx)
			}
			err = q.Publish(ctx, n, "hello")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), `"q"`) {
					t.Fatalf("got %v, want %v naming the queue", err, tt.wantErr)
				}
				if engine.Of(n).Buffered() != 0 || len(tx.Staged) != 0 {
					t.Fatal("a refused publish left something behind")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tx.Staged) == 1; got != tt.wantStaged {
				t.Fatalf("staged = %v, want %v", got, tt.wantStaged)
			}
			if got := len(tx.AfterCommits) == 1; got != tt.wantHeld {
				t.Fatalf("held for commit = %v, want %v", got, tt.wantHeld)
			}
			if got := engine.Of(n).Buffered() == 1; got != tt.wantBuffer {
				t.Fatalf("buffered = %v, want %v", got, tt.wantBuffer)
			}
			if tt.wantHeld {
				tx.AfterCommits[0]() // the commit
				if engine.Of(n).Buffered() != 1 {
					t.Fatal("after commit the message is not buffered")
				}
			}
		})
	}
}

type cyclic struct {
	Next *cyclic `json:"next"`
}

// rejectsDecode encodes fine but never decodes back.
type rejectsDecode struct{ V int }

func (r *rejectsDecode) UnmarshalJSON([]byte) error { return errors.New("no way back") }

func TestPublishRejectsNonJSON(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, nil)
	ctx := context.Background()
	loop := &cyclic{}
	loop.Next = loop
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidPayload) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%s: got %v, want ErrInvalidPayload naming the queue", name, err)
		}
	}
	qa := txmq.MustDeclareIn(n.Registry(), "anys", txmq.QueueConfig[any]{Transactional: txmq.Try})
	check("anys", qa.Publish(ctx, n, make(chan int)))
	check("anys", qa.Publish(ctx, n, func() {}))
	check("anys", qa.Publish(ctx, n, math.NaN()))
	check("anys", qa.Publish(ctx, n, math.Inf(1)))
	check("anys", qa.PublishMany(ctx, n, []any{1, loop}))
	qr := txmq.MustDeclareIn(n.Registry(), "rejects", txmq.QueueConfig[rejectsDecode]{Transactional: txmq.Try})
	check("rejects", qr.Publish(ctx, n, rejectsDecode{V: 1}))
	if engine.Of(n).Buffered() != 0 {
		t.Fatal("a rejected call buffered messages")
	}
	if err := qa.Publish(ctx, n, map[string]any{"ok": []int{1}}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseDrainsBuffer(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 10})
	for i := range 25 {
		if err := q.Publish(context.Background(), n, i); err != nil {
			t.Fatal(err)
		}
	}
	if len(fb.Batches()) != 0 {
		t.Fatal("published before the window")
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, b := range fb.Batches() {
		e, err := envelope.Decode(b.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Messages) > 10 {
			t.Fatalf("batch of %d messages, MaxBatchMessages 10", len(e.Messages))
		}
		got += len(e.Messages)
	}
	if got != 25 || len(fb.Batches()) != 3 {
		t.Fatalf("drained %d messages in %d batches, want 25 in 3", got, len(fb.Batches()))
	}
}

func TestRefusedFlushGoesToOutbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		handoff    *handoffRecorder
		wantReason string
	}{
		{"handed off", &handoffRecorder{}, ""},
		{"handoff fails", &handoffRecorder{Err: errors.New("db down")}, core.ReasonOutboxHandoffFailed},
		{"no outbox", nil, core.ReasonNoOutbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := &txmq.NodeOptions{}
			if tc.handoff != nil {
				opts.Handoff = tc.handoff
			}
			n, fb := newTestNode(t, opts)
			fb.PublishErr = core.ErrBackendUnavailable
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
			_ = q.Publish(context.Background(), n, 1)
			_ = n.Close(context.Background())
			st := n.Stats()
			if tc.wantReason == "" {
				if len(tc.handoff.Got) != 1 || st.HandedOff != 1 || len(st.Dropped) != 0 {
					t.Fatalf("handoff %d, stats %+v", len(tc.handoff.Got), st)
				}
				return
			}
			if st.Dropped[tc.wantReason] != 1 {
				t.Fatalf("dropped %v, want one %s", st.Dropped, tc.wantReason)
			}
		})
	}
}

func TestFlusherWithInjectedClock(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n, fb := newTestNode(t, &txmq.NodeOptions{Clock: clock, FlushTick: time.Millisecond})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Publish(context.Background(), n, 1)
	time.Sleep(20 * time.Millisecond) // many ticks, but the injected clock has not moved
	if len(fb.Batches()) != 0 {
		t.Fatal("flushed before the window on the injected clock")
	}
	clock.Add(100 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for len(fb.Batches()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(fb.Batches()) != 1 {
		t.Fatal("not flushed after the window")
	}
}

func TestDedupAndSlicing(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxBatchMessages: 2,
		Dedup: func(in []int) []int {
			seen := map[int]bool{}
			var out []int
			for _, v := range in {
				if !seen[v] {
					seen[v] = true
					out = append(out, v)
				}
			}
			return out
		}})
	tx := &fakeTx{}
	ctx := core.ContextWithTx(context.Background(), tx)
	_ = q.PublishMany(ctx, n, []int{1, 2, 1, 3})
	_ = q.PublishMany(ctx, n, []int{3, 4})
	firstID := tx.Staged[0].Messages[0].ID
	bs, err := core.Batches(tx.Staged, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	var ids []string
	for _, b := range bs {
		e, _ := envelope.Decode(b.Body)
		if len(e.Messages) > 2 {
			t.Fatalf("batch of %d", len(e.Messages))
		}
		for i, m := range e.Messages {
			var v int
			_ = json.Unmarshal(m, &v)
			got = append(got, v)
			ids = append(ids, e.MessageIDs[i])
		}
	}
	if len(got) != 4 || len(bs) != 2 {
		t.Fatalf("got %v in %d batches, want 1..4 in 2", got, len(bs))
	}
	if ids[0] != firstID {
		t.Fatalf("dedup lost the kept message's id: %s vs %s", ids[0], firstID)
	}
}

// slowPublish takes a while for every batch, honouring ctx.
type slowPublish struct {
	fakeBackend
	delay time.Duration
}

func (s *slowPublish) Publish(ctx context.Context, b core.OutgoingBatch) error {
	select {
	case <-time.After(s.delay):
		return s.fakeBackend.Publish(ctx, b)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestLargeFlushOnSlowBackend: a flush of many batches on a slow backend gives each batch its
// own timeout from the moment its write starts; batches waiting for a write slot must not run
// out of time (they used to share one deadline and were dropped), and a publish that times out
// is still handed to the outbox on a live context.
func TestLargeFlushOnSlowBackend(t *testing.T) {
	t.Parallel()
	slow := &slowPublish{delay: 40 * time.Millisecond}
	n := newTestNodeOn(t, slow, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, ClaimTimeout: 150 * time.Millisecond})
	ctx := context.Background()
	for i := range 40 { // 40 queues, one batch each: 5 rounds of 8 writes, 200 ms in all
		q := txmq.MustDeclareIn(n.Registry(), fmt.Sprintf("q%d", i), txmq.QueueConfig[int]{Transactional: txmq.Try})
		if err := q.Publish(ctx, n, i); err != nil {
			t.Fatal(err)
		}
	}
	engine.Of(n).FlushDue(true)
	if got := len(slow.Batches()); got != 40 {
		t.Fatalf("%d of 40 batches stored; dropped: %v", got, n.Stats().Dropped)
	}

	// A publish that times out goes to the outbox on a context that is still alive.
	stuck := &slowPublish{delay: time.Hour}
	h := &ctxHandoff{}
	n2 := newTestNodeOn(t, stuck, &txmq.NodeOptions{Handoff: h, FlushWindow: time.Hour, FlushCap: time.Hour, ClaimTimeout: 50 * time.Millisecond})
	q := txmq.MustDeclareIn(n2.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Publish(ctx, n2, 1)
	engine.Of(n2).FlushDue(true)
	if h.got != 1 || h.deadErr != nil {
		t.Fatalf("handoffs %d, ctx error at handoff %v; want 1 with a live context", h.got, h.deadErr)
	}
}

// ctxHandoff records handoffs and whether their context was already done.
type ctxHandoff struct {
	mu      sync.Mutex
	got     int
	deadErr error
}

func (h *ctxHandoff) Handoff(ctx context.Context, bs []core.OutgoingBatch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got += len(bs)
	if err := ctx.Err(); err != nil {
		h.deadErr = err
		return err
	}
	return nil
}

// TestDefaultFlushBound: at the defaults, a steady stream (a message every 5 ms, so the
// 20 ms window never goes quiet) is flushed 100 ms after its first message, not later: a
// plain publish's wait in the buffer is bounded from the first message at any rate.
func TestDefaultFlushBound(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n, fb := newTestNode(t, &txmq.NodeOptions{Clock: clock, FlushTick: time.Millisecond})
	if engine.Of(n).Options().FlushWindow != 20*time.Millisecond || engine.Of(n).Options().FlushCap != 100*time.Millisecond {
		t.Fatalf("defaults: FlushWindow %v, FlushCap %v; want 20ms and 100ms", engine.Of(n).Options().FlushWindow, engine.Of(n).Options().FlushCap)
	}
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	for i := range 20 { // +0 ms .. +95 ms
		_ = q.Publish(context.Background(), n, i)
		time.Sleep(2 * time.Millisecond) // let the flusher tick on the unmoved clock
		if len(fb.Batches()) != 0 {
			t.Fatalf("flushed at +%v, before the cap, with the window never quiet", time.Duration(i)*5*time.Millisecond)
		}
		clock.Add(5 * time.Millisecond)
	}
	// The clock reads +100 ms: the cap from the first message is reached.
	deadline := time.Now().Add(5 * time.Second)
	for len(fb.Batches()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := len(fb.Batches()); got != 1 {
		t.Fatalf("%d batches at +100 ms, want the 20 messages in 1", got)
	}
}
