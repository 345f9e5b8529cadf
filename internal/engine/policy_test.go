package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// policyCase sets up a node with one listening queue and hands it claims directly.
type policyCase struct {
	t       *testing.T
	n       *txmq.Node
	fb      *fakeBackend
	sink    *fakeSink
	q       *txmq.Queue[int]
	runs    atomic.Int32
	onError atomic.Int32
	lastErr atomic.Value
}

func newPolicyCase(t *testing.T, listen func(context.Context, []int) error, onError func([]int, error, int) error) *policyCase {
	t.Helper()
	pc := &policyCase{t: t, sink: &fakeSink{}}
	pc.n, pc.fb = newTestNode(t, &txmq.NodeOptions{DeadLetters: pc.sink, Backoff: txmq.ExponentialBackoff(10*time.Second, time.Hour)})
	pc.q = txmq.MustDeclareIn(pc.n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 3,
		OnError: func(msgs []int, err error, attempts int) error {
			pc.onError.Add(1)
			pc.lastErr.Store(err)
			if onError != nil {
				return onError(msgs, err, attempts)
			}
			return nil
		}})
	if err := pc.q.Listen(pc.n, func(ctx context.Context, msgs []int) error {
		pc.runs.Add(1)
		return listen(ctx, msgs)
	}); err != nil {
		t.Fatal(err)
	}
	return pc
}

// deliver runs one claim of body (attempt in the envelope, deliveries from the backend).
func (pc *policyCase) deliver(body []byte, deliveries int) {
	pc.t.Helper()
	engine.Of(pc.n).Deliver(&core.Claim{Queue: "q", ID: "b", Body: body, Deliveries: deliveries, LeaseUntil: time.Now().Add(time.Minute)})
}

func batchBody(t *testing.T, attempt int, msgs ...string) []byte {
	t.Helper()
	e := &envelope.Envelope{ID: core.NewID(), Queue: "q", Attempt: attempt, Created: time.Now()}
	for _, m := range msgs {
		e.MessageIDs = append(e.MessageIDs, core.NewID())
		e.Messages = append(e.Messages, []byte(m))
	}
	return envelope.Encode(e)
}

func TestPolicySuccess(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(_ context.Context, msgs []int) error {
		if len(msgs) != 2 || msgs[0] != 1 || msgs[1] != 2 {
			t.Errorf("listener got %v", msgs)
		}
		return nil
	}, nil)
	pc.deliver(batchBody(t, 0, "1", "2"), 1)
	if len(pc.fb.Acked) != 1 || len(pc.fb.Retried) != 0 || len(pc.fb.Dropped) != 0 || pc.onError.Load() != 0 {
		t.Fatalf("acked %d retried %d dropped %d onError %d", len(pc.fb.Acked), len(pc.fb.Retried), len(pc.fb.Dropped), pc.onError.Load())
	}
}

// TestPolicyBudgetCountsRuns follows one always-failing batch through a budget of 3: runs 1
// and 2 are retried with the attempt written into the body, run 3 drops it.
func TestPolicyBudgetCountsRuns(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { return errors.New("nope") }, nil)
	body := batchBody(t, 0, "7")
	for run := 1; run <= 3; run++ {
		pc.deliver(body, 1)
		if run < 3 {
			if len(pc.fb.Retried) != run || pc.onError.Load() != 0 || len(pc.sink.Got) != 0 {
				t.Fatalf("run %d: retried %d, onError %d, dead letters %d", run, len(pc.fb.Retried), pc.onError.Load(), len(pc.sink.Got))
			}
			r := pc.fb.Retried[run-1]
			e, err := envelope.Decode(r.Body)
			if err != nil || e.Attempt != run {
				t.Fatalf("run %d: retried body attempt %v (%v), want %d", run, e, err, run)
			}
			lo, hi := time.Duration(float64(10*time.Second)*0.8)<<(run-1), time.Duration(float64(10*time.Second)*1.2)<<(run-1)
			if r.Delay < lo || r.Delay > hi {
				t.Fatalf("run %d: backoff %v outside [%v, %v]", run, r.Delay, lo, hi)
			}
			body = r.Body // a rewrite: Deliveries restarts at 1
		}
	}
	if pc.runs.Load() != 3 || pc.onError.Load() != 1 || len(pc.sink.Got) != 1 || len(pc.fb.Dropped) != 1 {
		t.Fatalf("runs %d onError %d deadLetters %d dropped %d", pc.runs.Load(), pc.onError.Load(), len(pc.sink.Got), len(pc.fb.Dropped))
	}
	dl := pc.sink.Got[0]
	if dl.Reason != core.ReasonDeliveryExhausted || dl.Attempts != 3 || dl.Messages != 1 || !strings.Contains(dl.Error, "nope") {
		t.Fatalf("dead letter %+v", dl)
	}
	if got := pc.n.Stats().Dropped[core.ReasonDeliveryExhausted]; got != 1 {
		t.Fatalf("dropped counter %d", got)
	}
}

// TestPolicyInPlaceRetry: an adapter that retries in place keeps the body and counts
// deliveries; the budget is the same.
func TestPolicyInPlaceRetry(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { return errors.New("nope") }, nil)
	body := batchBody(t, 0, "7")
	for d := 1; d <= 3; d++ {
		pc.deliver(body, d)
	}
	if pc.runs.Load() != 3 || len(pc.fb.Retried) != 2 || pc.onError.Load() != 1 {
		t.Fatalf("runs %d retried %d onError %d", pc.runs.Load(), len(pc.fb.Retried), pc.onError.Load())
	}
}

func TestPolicyPanics(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { panic("listener boom") },
		func([]int, error, int) error { panic("onError boom") })
	pc.sink.Boom = true
	pc.deliver(batchBody(t, 0, "1"), 1)
	if len(pc.fb.Retried) != 1 {
		t.Fatal("a panicking listener was not retried")
	}
	var pe *txmq.PanicError
	pc.deliver(batchBody(t, 2, "1"), 1) // last run
	if !errors.As(pc.lastErr.Load().(error), &pe) || pe.Value != "listener boom" {
		t.Fatalf("OnError got %v, want the listener's *PanicError", pc.lastErr.Load())
	}
	if len(pc.fb.Dropped) != 1 || pc.onError.Load() != 1 {
		t.Fatalf("a panicking OnError and sink must still drop once: dropped %d onError %d", len(pc.fb.Dropped), pc.onError.Load())
	}
	if pc.n.Stats().Dropped[core.ReasonDeadLetterFailed] != 1 || len(pc.fb.Retried) != 1 {
		t.Fatalf("a panicking sink must be counted and must not cause a redelivery: %+v", pc.n.Stats())
	}
}

func TestPolicyUndecodable(t *testing.T) {
	t.Parallel()
	for name, body := range map[string][]byte{
		"not json":      []byte("{oops"),
		"wrong type":    batchBody(t, 0, `"a string"`),
		"wrong version": []byte(`{"v":99,"id":"x","q":"q","ids":[],"m":[]}`),
		"id mismatch":   []byte(`{"v":1,"id":"x","q":"q","ids":[],"m":[1]}`),
		"other queue":   []byte(`{"v":1,"id":"x","q":"zz","ids":["a"],"m":[1]}`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pc := newPolicyCase(t, func(context.Context, []int) error { return nil }, nil)
			pc.deliver(body, 1)
			if pc.runs.Load() != 0 || len(pc.fb.Retried) != 0 || len(pc.fb.Dropped) != 1 || pc.fb.Dropped[0] != core.ReasonUndecodable {
				t.Fatalf("runs %d retried %d dropped %v", pc.runs.Load(), len(pc.fb.Retried), pc.fb.Dropped)
			}
			if len(pc.sink.Got) != 1 || pc.sink.Got[0].Reason != core.ReasonUndecodable || pc.onError.Load() != 0 {
				t.Fatalf("dead letters %v onError %d", pc.sink.Got, pc.onError.Load())
			}
			if pc.n.Stats().Dropped[core.ReasonUndecodable] != 1 {
				t.Fatal("not counted")
			}
		})
	}
}

func TestPolicyWorkerLost(t *testing.T) {
	t.Parallel()
	pc := newPolicyCase(t, func(context.Context, []int) error { return nil }, nil)
	// Attempt 1 spent by a failure, then two deliveries that never settled: the third
	// delivery is run 4 > budget 3.
	pc.deliver(batchBody(t, 1, "1"), 3)
	if pc.runs.Load() != 0 || len(pc.fb.Dropped) != 1 || pc.fb.Dropped[0] != core.ReasonWorkerLost || pc.onError.Load() != 1 {
		t.Fatalf("runs %d dropped %v onError %d", pc.runs.Load(), pc.fb.Dropped, pc.onError.Load())
	}
	if err := pc.lastErr.Load().(error); !errors.Is(err, core.ErrWorkerLost) {
		t.Fatalf("OnError got %v", err)
	}
	// Within budget: it runs.
	pc.deliver(batchBody(t, 1, "1"), 2)
	if pc.runs.Load() != 1 {
		t.Fatal("run 3 of 3 did not run")
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	e := &envelope.Envelope{ID: core.NewID(), Queue: "q", Attempt: 4, Created: time.Now().UTC().Truncate(time.Microsecond),
		Trace:      map[string]string{"traceparent": "00-abc"},
		MessageIDs: []string{"a", "b"}, Messages: []json.RawMessage{[]byte(`{"x":"é\u2028"}`), []byte(`9007199254740993`)}}
	got, err := envelope.Decode(envelope.Encode(e))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != e.ID || got.Attempt != 4 || !got.Created.Equal(e.Created) || got.Trace["traceparent"] != "00-abc" ||
		string(got.Messages[0]) != string(e.Messages[0]) || string(got.Messages[1]) != "9007199254740993" {
		t.Fatalf("round trip: %+v", got)
	}
	re, err := envelope.ReencodeAttempt(envelope.Encode(e), 0)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := envelope.Decode(re); g.Attempt != 0 || g.ID != e.ID {
		t.Fatalf("reencode: %+v", g)
	}
	seen := map[string]bool{}
	for range 10000 {
		id := core.NewID()
		if seen[id] || len(id) != 26 {
			t.Fatalf("id %q repeated or of length %d", id, len(id))
		}
		seen[id] = true
	}
}
