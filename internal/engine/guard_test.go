package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// TestUserCallbacksPanicking: a panicking Backoff, ExtractTrace, backend Publish or Handoff is
// app or adapter code; it must neither crash the process nor lose or redeliver the batch.
func TestUserCallbacksPanicking(t *testing.T) {
	t.Parallel()
	traced := func(t *testing.T) []byte {
		e := &envelope.Envelope{ID: core.NewID(), Queue: "q", Created: time.Now(), Trace: map[string]string{"traceparent": "00-x"},
			MessageIDs: []string{"m"}, Messages: []json.RawMessage{[]byte("1")}}
		_ = t
		return envelope.Encode(e)
	}
	tests := []struct {
		name    string
		opts    txmq.NodeOptions
		body    func(t *testing.T) []byte
		fail    bool
		acked   int
		retried int
	}{
		{"Backoff", txmq.NodeOptions{Backoff: func(int) time.Duration { panic("backoff boom") }}, func(t *testing.T) []byte { return batchBody(t, 0, "1") }, true, 0, 1},
		{"ExtractTrace", txmq.NodeOptions{ExtractTrace: func(context.Context, map[string]string) context.Context { panic("trace boom") }}, traced, false, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			n, fb := newTestNode(t, &opts)
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
			_ = q.Listen(n, func(context.Context, []int) error {
				if tt.fail {
					return errors.New("nope")
				}
				return nil
			})
			engine.Of(n).Deliver(&core.Claim{Queue: "q", ID: "b", Body: tt.body(t), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)})
			acked, retried, dropped := fb.Counts()
			if acked != tt.acked || retried != tt.retried || dropped != 0 {
				t.Fatalf("acked %d retried %d dropped %d, want %d/%d/0", acked, retried, dropped, tt.acked, tt.retried)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		handoff core.Handoff
		reason  string
	}{
		{"Publish, no outbox", nil, core.ReasonNoOutbox},
		{"Publish and Handoff", panicHandoff{}, core.ReasonOutboxHandoffFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fb := &fakeBackend{PublishFn: func(context.Context, core.OutgoingBatch) error { panic("publish boom") }}
			n := newTestNodeOn(t, fb, &txmq.NodeOptions{Handoff: tc.handoff})
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
			_ = q.Publish(context.Background(), n, 1)
			_ = n.Close(context.Background())
			if st := n.Stats(); st.Dropped[tc.reason] != 1 || st.Buffered != 0 {
				t.Fatalf("stats %+v, want one %s drop", st, tc.reason)
			}
		})
	}
}

type panicHandoff struct{}

func (panicHandoff) Handoff(context.Context, []core.OutgoingBatch) error { panic("handoff boom") }

// TestSlowOnErrorKeepsTheLease: the terminal path (dead-letter sink, OnError, Drop) may take
// longer than a lease; the node keeps extending it meanwhile, or another node would deliver the
// batch again and OnError would fire twice.
func TestSlowOnErrorKeepsTheLease(t *testing.T) {
	t.Parallel()
	// A lease long enough that a loaded machine still confirms its extensions before the fence.
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: time.Second})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 1,
		OnError: func([]int, error, int) error { time.Sleep(1500 * time.Millisecond); return nil }})
	_ = q.Listen(n, func(context.Context, []int) error { return errors.New("nope") })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	engine.Of(n).Deliver(&core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Second)})
	fb.Mu.Lock()
	extends := fb.Extends
	fb.Mu.Unlock()
	if _, _, dropped := fb.Counts(); dropped != 1 || extends == 0 {
		t.Fatalf("dropped %d, lease extended %d times during a 1.5s OnError on a 1s lease; want 1 and > 0", dropped, extends)
	}
}
