package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// orderingFake is the fake backend with the per-key ordering capability.
type orderingFake struct{ *fakeBackend }

func (orderingFake) OrdersKeys() error { return nil }

// TestOrderedPublishErrors: an Ordered queue needs a valid key; an unordered one takes none;
// a schedule on an Ordered queue is refused. Each error names the queue.
func TestOrderedPublishErrors(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	n := newTestNodeOn(t, orderingFake{&fakeBackend{}}, &txmq.NodeOptions{Registry: reg})
	oq := txmq.MustDeclareIn(reg, "ordered", txmq.QueueConfig[int]{Transactional: txmq.Try, Ordered: true})
	pq := txmq.MustDeclareIn(reg, "plain", txmq.QueueConfig[int]{Transactional: txmq.Try})
	for _, tt := range []struct {
		name string
		q    *txmq.Queue[int]
		opts []txmq.PublishOption
		ok   bool
	}{
		{"no key", oq, nil, false},
		{"empty key", oq, []txmq.PublishOption{txmq.Key("")}, false},
		{"space", oq, []txmq.PublishOption{txmq.Key("a b")}, false},
		{"too long", oq, []txmq.PublishOption{txmq.Key(strings.Repeat("k", core.MaxKeyBytes+1))}, false},
		{"non-ASCII", oq, []txmq.PublishOption{txmq.Key("é")}, false},
		{"key on plain", pq, []txmq.PublishOption{txmq.Key("k")}, false},
		{"good", oq, []txmq.PublishOption{txmq.Key("acct-42")}, true},
		{"longest", oq, []txmq.PublishOption{txmq.Key(strings.Repeat("k", core.MaxKeyBytes))}, true},
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
	if err := oq.Schedule("tick", txmq.ScheduleConfig[int]{Cron: "@every 1m"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "ordered") {
		t.Errorf("Schedule on an Ordered queue: %v; want ErrInvalidConfig", err)
	}
}

// TestOrderedRefused: a backend without core.KeyOrderer refuses an Ordered queue at NewNode
// (declared before), Listen and Publish (declared after), naming the queue and the adapter.
func TestOrderedRefused(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	txmq.MustDeclareIn(reg, "early", txmq.QueueConfig[int]{Transactional: txmq.Try, Ordered: true})
	_, err := txmq.NewNode(&fakeBackend{}, &txmq.NodeOptions{Registry: reg, Logger: quietLogger()})
	check := func(call string, err error, queue string) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "fakeBackend") {
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q and the adapter", call, err, queue)
		}
	}
	check("NewNode", err, "early")
	reg2 := txmq.NewRegistry()
	n := newTestNodeOn(t, &fakeBackend{}, &txmq.NodeOptions{Registry: reg2})
	q := txmq.MustDeclareIn(reg2, "late", txmq.QueueConfig[int]{Transactional: txmq.Try, Ordered: true})
	check("Listen", q.Listen(n, func(context.Context, []int) error { return nil }), "late")
	check("Publish", q.Publish(context.Background(), n, 1, txmq.Key("k")), "late")
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
	reg := txmq.NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &txmq.NodeOptions{Registry: reg, Handoff: h})
	txmq.MustDeclareIn(reg, "q", txmq.QueueConfig[string]{Transactional: txmq.Try, Ordered: true, MaxBatchMessages: 1})
	spec := engine.Of(n).Spec("q")
	var ps []*core.Pending
	for i := 1; i <= 3; i++ {
		ps = append(ps, keyedPending(spec, "a", fmt.Sprintf("a%d", i), time.Time{}), keyedPending(spec, "b", fmt.Sprintf("b%d", i), time.Time{}))
	}
	engine.Of(n).FlushPending(context.Background(), spec, ps)
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
