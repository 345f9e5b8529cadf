package txmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// orderingFake is a backend that keeps per-key order (core.OrdersKeys).
type orderingFake struct{ *fakeBackend }

func (orderingFake) OrdersKeys() error { return nil }

// dedupFake is a backend that deduplicates caller ids (core.DedupsIDs).
type dedupFake struct {
	*fakeBackend
	single bool
	max    time.Duration
}

func (d dedupFake) DedupIDs() (core.DedupSupport, error) {
	return core.DedupSupport{OnePerBatch: d.single, MaxWindow: d.max}, nil
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
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "fakes.Backend") {
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

// TestIDDedupRefused: a queue with an IDDedupWindow is refused by a node whose backend cannot
// deduplicate ids (at NewNode, Listen and Publish), or not for that long; a negative window
// fails the declaration.
func TestIDDedupRefused(t *testing.T) {
	t.Parallel()
	check := func(call string, err error, queue, what string) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q and %q", call, err, queue, what)
		}
	}
	reg := NewRegistry()
	MustDeclareIn(reg, "early", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Minute})
	_, err := NewNode(&fakeBackend{}, &NodeOptions{Registry: reg, Logger: quietLogger()})
	check("NewNode", err, "early", "fakes.Backend")
	reg2 := NewRegistry()
	n := newTestNodeOn(t, &fakeBackend{}, &NodeOptions{Registry: reg2})
	q := MustDeclareIn(reg2, "late", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Minute})
	check("Listen", q.Listen(n, func(context.Context, []int) error { return nil }), "late", "fakes.Backend")
	check("Publish", q.Publish(context.Background(), n, 1, ID("x")), "late", "fakes.Backend")
	reg3 := NewRegistry()
	MustDeclareIn(reg3, "long", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Hour})
	_, err = NewNode(dedupFake{fakeBackend: &fakeBackend{}, max: 5 * time.Minute}, &NodeOptions{Registry: reg3, Logger: quietLogger()})
	check("NewNode (window too long)", err, "long", "5m0s")
	_, err = DeclareIn(NewRegistry(), "neg", QueueConfig[int]{Transactional: Try, IDDedupWindow: -time.Second})
	check("DeclareIn", err, "neg", "IDDedupWindow")
}
