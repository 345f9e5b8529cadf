package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// TestTakeKeyWaitsForFlight: takeKey waits for the key's flight to land, then takes the key's
// publishes left in the buffer (only that key's).
func TestTakeKeyWaitsForFlight(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := newBuffer(time.Hour, time.Hour, nil)
	spec := &Spec{Name: "q", MaxBatch: 100, Ordered: true}
	b.add(keyedPending(spec, "a", "a1", time.Time{}), now)
	flying := b.take(now, true)
	b.add(keyedPending(spec, "a", "a2", time.Time{}), now)
	b.add(keyedPending(spec, "b", "b1", time.Time{}), now)
	got := make(chan *queueBuffer)
	go func() { got <- b.takeKey(context.Background(), spec, "a") }()
	select {
	case <-got:
		t.Fatal("takeKey returned while the key's flight had not landed")
	case <-time.After(20 * time.Millisecond):
	}
	b.landed(flying)
	qb := <-got
	if qb == nil || len(qb.pending) != 1 || qb.pending[0].Key != "a" || qb.messages != 1 {
		t.Fatalf("takeKey took %+v; want key a's one publish", qb)
	}
	rest := b.take(now, true)
	if len(rest) != 1 || len(rest[0].pending) != 1 || rest[0].pending[0].Key != "b" || rest[0].messages != 1 {
		t.Fatalf("left in the buffer %+v; want key b's publish", rest)
	}
	if b.takeKey(context.Background(), spec, "c") != nil {
		t.Fatal("takeKey of a key with nothing buffered returned publishes")
	}
}

func keyedPending(spec *Spec, key, body string, due time.Time) *core.Pending {
	return &core.Pending{Queue: spec.Name, Key: key, NotBefore: due, Batcher: &pendingMeta{spec: spec},
		Messages: []core.Message{{ID: body, Body: []byte(`"` + body + `"`)}}}
}

// bodies lists the messages of a batch.
func bodies(t *testing.T, b core.OutgoingBatch) string {
	t.Helper()
	env, err := envelope.Decode(b.Body)
	if err != nil {
		t.Fatal(err)
	}
	if env.Key != b.Key {
		t.Fatalf("batch key %q, envelope key %q", b.Key, env.Key)
	}
	var s []string
	for _, m := range env.Messages {
		s = append(s, strings.Trim(string(m), `"`))
	}
	return b.Key + ":" + strings.Join(s, ",")
}

// TestBatchesOrdered: on an ordered queue a batch holds one key; a key's batches come in
// publish order, a change of due time starting a new batch (so no message overtakes an
// earlier one of its key); MaxBatchMessages still cuts.
func TestBatchesOrdered(t *testing.T) {
	t.Parallel()
	now := time.Now()
	later := now.Add(time.Minute)
	spec := &Spec{Name: "q", MaxBatch: 2, Ordered: true}
	ps := []*core.Pending{
		keyedPending(spec, "a", "a1", time.Time{}),
		keyedPending(spec, "b", "b1", time.Time{}),
		keyedPending(spec, "a", "a2", later),
		keyedPending(spec, "a", "a3", later),
		keyedPending(spec, "a", "a4", time.Time{}),
		keyedPending(spec, "b", "b2", time.Time{}),
		keyedPending(spec, "b", "b3", time.Time{}),
	}
	bs, err := core.Batches(ps, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, bodies(t, b))
	}
	want := []string{"a:a1", "b:b1,b2", "b:b3", "a:a2,a3", "a:a4"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches %v; want %v", got, want)
	}
	if bs[3].Delay <= 0 || bs[4].Delay != 0 {
		t.Fatalf("delays %v and %v; want the a2,a3 batch delayed and a4 not", bs[3].Delay, bs[4].Delay)
	}
}

// TestOrderLanes: unkeyed batches alone, a key's batches together in order.
func TestOrderLanes(t *testing.T) {
	t.Parallel()
	bs := []core.OutgoingBatch{{Queue: "q", Key: "a"}, {Queue: "q"}, {Queue: "q", Key: "b"}, {Queue: "r", Key: "a"}, {Queue: "q", Key: "a"}}
	if got := fmt.Sprint(orderLanes(bs)); got != "[[0 4] [1] [2] [3]]" {
		t.Fatalf("lanes %s", got)
	}
}

// TestBufferFullByKey: an ordered queue's buffer is full when one key holds MaxBatchMessages,
// not when the queue does (its batches hold one key each).
func TestBufferFullByKey(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := newBuffer(time.Hour, time.Hour, nil)
	spec := &Spec{Name: "q", MaxBatch: 3, Ordered: true}
	for _, k := range []string{"a", "b", "c", "a", "b"} {
		b.add(keyedPending(spec, k, k, time.Time{}), now)
	}
	if got := b.take(now, false); len(got) != 0 {
		t.Fatalf("took %d queue buffers with 5 messages over 3 keys (at most 2 per key); want none", len(got))
	}
	b.add(keyedPending(spec, "a", "a", time.Time{}), now)
	if got := b.take(now, false); len(got) != 1 || got[0].messages != 6 {
		t.Fatalf("took %v once key a holds 3; want the queue's 6 messages", got)
	}
}

func idPending(spec *Spec, callerIDs bool, single bool, ids ...string) *core.Pending {
	msgs := make([]core.Message, len(ids))
	for i, id := range ids {
		msgs[i] = core.Message{ID: id, Body: []byte(`"` + id + `"`)}
	}
	return &core.Pending{Queue: spec.Name, Messages: msgs, Batcher: &pendingMeta{spec: spec, callerIDs: callerIDs, onePerBatch: single}}
}

// TestBatchesDedupIDs: on a queue with an IDDedupWindow, caller-id messages go in batches of
// their own asking for dedup (their envelope says so too), the first of a repeated id is kept,
// generated-id messages go in plain batches, and a backend that deduplicates whole batches
// gets one message per batch. Without a window nothing asks for dedup.
func TestBatchesDedupIDs(t *testing.T) {
	t.Parallel()
	type want struct {
		ids    []string
		window time.Duration
	}
	for _, tc := range []struct {
		name   string
		window time.Duration
		single bool
		want   []want
	}{
		{"no window", 0, false, []want{{[]string{"g1", "a", "b", "g2", "a", "c"}, 0}}},
		{"window", time.Minute, false, []want{{[]string{"g1", "g2"}, 0}, {[]string{"a", "b", "c"}, time.Minute}}},
		{"window, one per batch", time.Minute, true, []want{{[]string{"g1", "g2"}, 0}, {[]string{"a"}, time.Minute}, {[]string{"b"}, time.Minute}, {[]string{"c"}, time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := &Spec{Name: "q", MaxBatch: 10, IDWindow: tc.window}
			ps := []*core.Pending{
				idPending(spec, false, tc.single, "g1"),
				idPending(spec, true, tc.single, "a", "b"),
				idPending(spec, false, tc.single, "g2"),
				idPending(spec, true, tc.single, "a", "c"),
			}
			bs, err := core.Batches(ps, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, b := range bs {
				env, err := envelope.Decode(b.Body)
				if err != nil {
					t.Fatal(err)
				}
				if b.DedupWindow > 0 && (!slices.Equal(b.DedupIDs, env.MessageIDs) || env.DedupMillis != b.DedupWindow.Milliseconds()) {
					t.Fatalf("batch %q: DedupIDs %q, envelope dw %d, window %v", env.MessageIDs, b.DedupIDs, env.DedupMillis, b.DedupWindow)
				}
				if b.DedupWindow == 0 && (b.DedupIDs != nil || env.DedupMillis != 0) {
					t.Fatalf("plain batch %q asks for dedup", env.MessageIDs)
				}
				got = append(got, want{env.MessageIDs, b.DedupWindow})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("batches %v, want %v", got, tc.want)
			}
			for i := range got {
				if !slices.Equal(got[i].ids, tc.want[i].ids) || got[i].window != tc.want[i].window {
					t.Fatalf("batches %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBufferTiming(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := &Spec{Name: "q", MaxBatch: 200}
	msg := func(k int) *core.Pending {
		return &core.Pending{Queue: "q", Batcher: &pendingMeta{spec: spec}, Messages: make([]core.Message, k)}
	}
	tests := []struct {
		name  string
		adds  []time.Duration // offsets of one-message publishes
		big   int             // one more publish of this many messages at the last offset
		check time.Duration
		due   bool
	}{
		{"inside the window", []time.Duration{0}, 0, 99 * time.Millisecond, false},
		{"window passed", []time.Duration{0}, 0, 100 * time.Millisecond, true},
		{"window reset by each message", []time.Duration{0, 90 * time.Millisecond}, 0, 150 * time.Millisecond, false},
		{"window after the last message", []time.Duration{0, 90 * time.Millisecond}, 0, 190 * time.Millisecond, true},
		{"cap from the first message", steady(50*time.Millisecond, 100), 0, 5 * time.Second, true},
		{"before the cap", steady(50*time.Millisecond, 99), 0, 4950 * time.Millisecond, false},
		{"full at the next tick", []time.Duration{0}, 199, 0, true},
		{"one short of full", []time.Duration{0}, 198, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBuffer(100*time.Millisecond, 5*time.Second, nil)
			for _, off := range tt.adds {
				b.add(msg(1), t0.Add(off))
			}
			if tt.big > 0 {
				b.add(msg(tt.big), t0.Add(tt.adds[len(tt.adds)-1]))
			}
			taken := b.take(t0.Add(tt.check), false)
			got := len(taken) == 1
			if got != tt.due {
				t.Fatalf("due at +%v = %v, want %v", tt.check, got, tt.due)
			}
			if got {
				if b.size() != taken[0].messages {
					t.Fatal("taken messages must count until stored")
				}
				b.stored(taken[0].messages)
				if b.size() != 0 {
					t.Fatal("stored messages still counted")
				}
			}
		})
	}
}

// steady returns n offsets spaced by d, starting at 0.
func steady(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * d
	}
	return out
}
