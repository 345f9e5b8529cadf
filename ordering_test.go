package txmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// orderingFake is the fake backend with the per-key ordering capability.
type orderingFake struct{ *fakeBackend }

func (orderingFake) OrdersKeys() error { return nil }

func keyedPending(spec *queueSpec, key, body string, due time.Time) *core.Pending {
	return &core.Pending{Queue: spec.name, Key: key, NotBefore: due, Batcher: &pendingMeta{spec: spec},
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
	spec := &queueSpec{name: "q", maxBatch: 2, ordered: true}
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

// TestOrderedPublishErrors: an Ordered queue needs a valid key; an unordered one takes none;
// a schedule on an Ordered queue is refused. Each error names the queue.
func TestOrderedPublishErrors(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	n := newTestNodeOn(t, orderingFake{&fakeBackend{}}, &NodeOptions{Registry: reg})
	oq := MustDeclareIn(reg, "ordered", QueueConfig[int]{Transactional: Try, Ordered: true})
	pq := MustDeclareIn(reg, "plain", QueueConfig[int]{Transactional: Try})
	for _, tt := range []struct {
		name string
		q    *Queue[int]
		opts []PublishOption
		ok   bool
	}{
		{"no key", oq, nil, false},
		{"empty key", oq, []PublishOption{Key("")}, false},
		{"space", oq, []PublishOption{Key("a b")}, false},
		{"too long", oq, []PublishOption{Key(strings.Repeat("k", core.MaxKeyBytes+1))}, false},
		{"non-ASCII", oq, []PublishOption{Key("é")}, false},
		{"key on plain", pq, []PublishOption{Key("k")}, false},
		{"good", oq, []PublishOption{Key("acct-42")}, true},
		{"longest", oq, []PublishOption{Key(strings.Repeat("k", core.MaxKeyBytes))}, true},
		{"plain", pq, nil, true},
	} {
		err := tt.q.Publish(context.Background(), n, 1, tt.opts...)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !tt.ok && (!errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.q.Name())):
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q", tt.name, err, tt.q.Name())
		}
	}
	if err := oq.Schedule("tick", ScheduleConfig[int]{Cron: "@every 1m"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "ordered") {
		t.Errorf("Schedule on an Ordered queue: %v; want ErrInvalidConfig", err)
	}
}

// TestOrderedRefused: a backend without core.KeyOrderer refuses an Ordered queue at NewNode
// (declared before), Listen and Publish (declared after), naming the queue and the adapter.
func TestOrderedRefused(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	MustDeclareIn(reg, "early", QueueConfig[int]{Transactional: Try, Ordered: true})
	_, err := NewNode(&fakeBackend{}, &NodeOptions{Registry: reg, Logger: quietLogger()})
	check := func(call string, err error, queue string) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "fakeBackend") {
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q and the adapter", call, err, queue)
		}
	}
	check("NewNode", err, "early")
	reg2 := NewRegistry()
	n := newTestNodeOn(t, &fakeBackend{}, &NodeOptions{Registry: reg2})
	q := MustDeclareIn(reg2, "late", QueueConfig[int]{Transactional: Try, Ordered: true})
	check("Listen", q.Listen(n, func(context.Context, []int) error { return nil }), "late")
	check("Publish", q.Publish(context.Background(), n, 1, Key("k")), "late")
}

// TestFlushOrderedHandoff: a flush writes a key's batches one after the other; once one is
// handed to the outbox, the later ones of its key follow it there, while other keys go on.
func TestFlushOrderedHandoff(t *testing.T) {
	t.Parallel()
	fb := &fakeBackend{}
	fb.publishFn = func(_ context.Context, b core.OutgoingBatch) error {
		if b.Key == "a" && strings.Contains(string(b.Body), `"a1"`) {
			return fmt.Errorf("down: %w", core.ErrBackendUnavailable)
		}
		return nil
	}
	h := &handoffRecorder{}
	reg := NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &NodeOptions{Registry: reg, Handoff: h})
	spec := MustDeclareIn(reg, "q", QueueConfig[string]{Transactional: Try, Ordered: true, MaxBatchMessages: 1}).spec
	var ps []*core.Pending
	for i := 1; i <= 3; i++ {
		ps = append(ps, keyedPending(spec, "a", fmt.Sprintf("a%d", i), time.Time{}), keyedPending(spec, "b", fmt.Sprintf("b%d", i), time.Time{}))
	}
	n.flush(context.Background(), []*queueBuffer{{spec: spec, pending: ps}}, false)
	var handed, published []string
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.got {
		handed = append(handed, bodies(t, b))
	}
	fb.mu.Lock()
	for _, b := range fb.published {
		published = append(published, bodies(t, b))
	}
	fb.mu.Unlock()
	if fmt.Sprint(handed) != "[a:a1 a:a2 a:a3]" {
		t.Fatalf("handed off %v; want key a's batches in order", handed)
	}
	if fmt.Sprint(published) != "[b:b1 b:b2 b:b3]" {
		t.Fatalf("published %v; want key b's batches in order", published)
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
	spec := &queueSpec{name: "q", maxBatch: 3, ordered: true}
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
