package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// TestEarlyArrivalGuard: a batch a backend hands out well before its due time (beyond the
// clock-skew allowance) is given back for what is left plus the allowance, without a run and
// with its attempt count unchanged; a batch inside the allowance, due, or without a due time
// runs.
func TestEarlyArrivalGuard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		due        time.Duration // from now, on the publisher's clock; 0 = no due time
		attempt    int
		deliveries int
		runs       int64
		giveBack   bool
	}{
		{"far ahead: given back", 10 * time.Minute, 0, 1, 0, true},
		{"far ahead after runs: attempt kept", 10 * time.Minute, 1, 2, 0, true},
		{"just past the allowance: given back", engine.EarlyAllowance + 5*time.Second, 0, 1, 0, true},
		{"inside the allowance (clock skew): runs", engine.EarlyAllowance - 5*time.Second, 0, 1, 1, false},
		{"due: runs", -time.Second, 0, 1, 1, false},
		{"no due time: runs", 0, 0, 1, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, fb := newTestNode(t, nil)
			q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, MaxAttempts: 3})
			var ran atomic.Int64
			_ = q.Listen(n, func(context.Context, []int) error { ran.Add(1); return nil })
			e := &envelope.Envelope{ID: core.NewID(), Queue: "q", Attempt: tt.attempt, Created: time.Now(), MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{[]byte("1")}}
			if tt.due != 0 {
				e.Due = time.Now().Add(tt.due)
			}
			engine.Of(n).Deliver(&core.Claim{Queue: "q", ID: e.ID, Body: envelope.Encode(e), Deliveries: tt.deliveries, LeaseUntil: time.Now().Add(time.Minute)})
			end := time.Now()
			if got := ran.Load(); got != tt.runs {
				t.Fatalf("listener ran %d times; want %d", got, tt.runs)
			}
			if got := n.Stats().Runs; got != tt.runs {
				t.Fatalf("Stats.Runs = %d; want %d", got, tt.runs)
			}
			fb.Mu.Lock()
			defer fb.Mu.Unlock()
			if !tt.giveBack {
				if len(fb.Retried) != 0 || len(fb.Acked) != 1 {
					t.Fatalf("retried %d, acked %d; want the batch run and acked", len(fb.Retried), len(fb.Acked))
				}
				return
			}
			if len(fb.Retried) != 1 || len(fb.Acked) != 0 || len(fb.Dropped) != 0 {
				t.Fatalf("retried %d, acked %d, dropped %d; want one give-back", len(fb.Retried), len(fb.Acked), len(fb.Dropped))
			}
			rt := fb.Retried[0]
			// Never early: what is left by this clock plus the whole skew allowance.
			if min := e.Due.Sub(end) + engine.EarlyAllowance; rt.Delay < min {
				t.Fatalf("given back for %v; want at least %v (what is left plus the allowance)", rt.Delay, min)
			}
			back, err := envelope.Decode(rt.Body)
			if err != nil {
				t.Fatalf("give-back body: %v", err)
			}
			if want := tt.attempt + tt.deliveries - 1; back.Attempt != want {
				t.Fatalf("give-back attempt %d; want %d (the early delivery is not a run)", back.Attempt, want)
			}
			if !back.Due.Equal(e.Due) {
				t.Fatalf("give-back due %v; want %v kept", back.Due, e.Due)
			}
			if got := n.Stats().EarlyArrivals; got != 1 {
				t.Fatalf("Stats.EarlyArrivals = %d; want 1", got)
			}
		})
	}
}

// TestBatchesDelay: a batch's Delay is its due time minus the publishing node's clock, and a
// due time in the past is no delay at all (not a NotBefore another clock would read).
func TestBatchesDelay(t *testing.T) {
	t.Parallel()
	n, _ := newTestNode(t, &txmq.NodeOptions{Clock: offsetClock(-txmq.MaxClockSkew)})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	for _, tt := range []struct {
		name string
		due  time.Duration
		want time.Duration
	}{{"ahead", 3 * time.Second, 3 * time.Second}, {"past", -time.Second, 0}} {
		p := engine.Pending(engine.Of(n).Spec(q.Name()), &core.Pending{Queue: "q", Messages: []core.Message{{ID: core.NewID(), Body: []byte("1")}}, NotBefore: engine.Of(n).Clock().Now().Add(tt.due)}, engine.PendingOpts{Clock: engine.Of(n).Clock()})
		bs, err := core.Batches([]*core.Pending{p}, time.Now())
		if err != nil || len(bs) != 1 {
			t.Fatalf("%s: Batches = %d, %v", tt.name, len(bs), err)
		}
		b := bs[0]
		if tt.want == 0 {
			if b.Delay != 0 || !b.NotBefore.IsZero() || b.DelayFrom(time.Now()) != 0 {
				t.Fatalf("%s: Delay %v NotBefore %v; want both zero", tt.name, b.Delay, b.NotBefore)
			}
			continue
		}
		if b.Delay > tt.want || b.Delay < tt.want-time.Second {
			t.Fatalf("%s: Delay %v; want about %v whatever the node clock's offset", tt.name, b.Delay, tt.want)
		}
		if got := b.DelayFrom(time.Now().Add(time.Hour)); got != b.Delay {
			t.Fatalf("%s: DelayFrom = %v; want Delay %v whatever now is", tt.name, got, b.Delay)
		}
		env, err := envelope.Decode(b.Body)
		if err != nil || !env.Due.Equal(p.NotBefore) {
			t.Fatalf("%s: envelope due %v (%v); want %v", tt.name, env.Due, err, p.NotBefore)
		}
	}
}

// offsetClock is a clock off by a fixed amount.
type offsetClock time.Duration

func (o offsetClock) Now() time.Time { return time.Now().Add(time.Duration(o)) }
