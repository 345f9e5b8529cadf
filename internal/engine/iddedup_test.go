package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/engine"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// dedupFake is the fake backend with id dedup (one message per batch when single is set).
type dedupFake struct {
	*fakeBackend
	single bool
	max    time.Duration
}

func (d dedupFake) DedupIDs() (core.DedupSupport, error) {
	return core.DedupSupport{OnePerBatch: d.single, MaxWindow: d.max}, nil
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
	reg := txmq.NewRegistry()
	txmq.MustDeclareIn(reg, "early", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: time.Minute})
	_, err := txmq.NewNode(&fakeBackend{}, &txmq.NodeOptions{Registry: reg, Logger: quietLogger()})
	check("NewNode", err, "early", "fakeBackend")
	reg2 := txmq.NewRegistry()
	n := newTestNodeOn(t, &fakeBackend{}, &txmq.NodeOptions{Registry: reg2})
	q := txmq.MustDeclareIn(reg2, "late", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: time.Minute})
	check("Listen", q.Listen(n, func(context.Context, []int) error { return nil }), "late", "fakeBackend")
	check("Publish", q.Publish(context.Background(), n, 1, txmq.ID("x")), "late", "fakeBackend")
	reg3 := txmq.NewRegistry()
	txmq.MustDeclareIn(reg3, "long", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: time.Hour})
	_, err = txmq.NewNode(dedupFake{fakeBackend: &fakeBackend{}, max: 5 * time.Minute}, &txmq.NodeOptions{Registry: reg3, Logger: quietLogger()})
	check("NewNode (window too long)", err, "long", "5m0s")
	_, err = txmq.DeclareIn(txmq.NewRegistry(), "neg", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: -time.Second})
	check("DeclareIn", err, "neg", "IDDedupWindow")
}

// TestDeduplicatedCounted: a node counts the repeats it leaves out, whether they met in one
// flush or the backend refused them, and stores each id once.
func TestDeduplicatedCounted(t *testing.T) {
	t.Parallel()
	be := memory.New(nil)
	defer be.Close()
	n := newTestNodeOn(t, be, &txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try, IDDedupWindow: time.Minute})
	ctx := context.Background()
	for _, id := range []string{"a", "b", "a"} { // one flush: the second a is left out there
		if err := q.Publish(ctx, n, 1, txmq.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(ctx, n, 2, txmq.After(time.Hour), txmq.ID("b")); err != nil { // another due time
		t.Fatal(err)
	}
	engine.Of(n).FlushAll(ctx)
	if err := q.PublishMany(ctx, n, []int{1, 2}, txmq.IDs("c", "a")); err != nil { // the backend refuses a
		t.Fatal(err)
	}
	engine.Of(n).FlushAll(ctx)
	st := n.Stats()
	if st.Deduplicated != 3 || st.PublishedMessages != 3 {
		t.Fatalf("Deduplicated %d, PublishedMessages %d; want 3 and 3 (a, b, c once each)", st.Deduplicated, st.PublishedMessages)
	}
}
