package draintest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// OrderedOldFirst runs the scenario of an ordered queue's swap on newBe (the primary) and
// oldBe: keys "a" and "b" have batches left in the old backend; new batches of them are
// published behind those (to the old backend), key "c" (nothing left in the old one) goes to
// the primary, and a listener over the drain wrapper must get every key in publish order,
// also while the old backend empties during the publishes. Both backends must be empty of the
// queue (it has a unique name) and order keys (core.KeyOrderer, and the old one
// core.KeyHolder); the caller closes them.
func OrderedOldFirst(t *testing.T, newBe, oldBe core.Backend) {
	t.Helper()
	primary, old := &counting{Backend: newBe}, &counting{Backend: oldBe}
	reg := txmq.NewRegistry()
	name := testenv.UniqueName("ordered")
	q := txmq.MustDeclareIn(reg, name, txmq.QueueConfig[string]{Transactional: txmq.Never, Ordered: true, MaxBatchMessages: 1})
	for seq := range 5 {
		publish(t, old, keyedBatch(name, "a", fmt.Sprint("a#", seq)))
	}
	publish(t, old, keyedBatch(name, "b", "b#0"))
	before := old.publishes.Load()

	d := drain.New(primary, []core.Backend{old}, &drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 50 * time.Millisecond})
	t.Cleanup(func() { _ = d.Close() })
	if err := core.OrdersKeys(d); err != nil {
		t.Fatalf("OrdersKeys of the drain wrapper: %v", err)
	}
	node := txmqtest.StartNode(t, d, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 50 * time.Millisecond})
	ctx := context.Background()
	pub := func(key string, from, to int) {
		t.Helper()
		for seq := from; seq < to; seq++ {
			if err := q.Publish(ctx, node, fmt.Sprint(key, "#", seq), txmq.Key(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub("a", 5, 8)
	pub("b", 1, 3)
	pub("c", 0, 3)
	txmqtest.Eventually(t, 10*time.Second, func() bool { return node.Stats().Buffered == 0 }, "the buffer flushed")
	if got := old.publishes.Load() - before; got != 5 {
		t.Fatalf("%d batches published to the old backend; want 5 (a#5-7 and b#1-2, behind their keys' old batches)", got)
	}
	if got := primary.publishes.Load(); got != 3 {
		t.Fatalf("%d batches published to the primary; want 3 (key c, nothing of it in the old backend)", got)
	}

	s := &keySeq{next: map[string]int{}}
	if err := q.Listen(node, func(ctx context.Context, msgs []string) error {
		s.record(msgs)
		select { // slow enough that the publishes below meet the old backend still busy
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Key a keeps coming while the old backend empties: each batch goes where its key is.
	for seq := 8; seq < 40; seq++ {
		pub("a", seq, seq+1)
		time.Sleep(2 * time.Millisecond)
	}
	want := map[string]int{"a": 40, "b": 3, "c": 3}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		for k, n := range want {
			if s.got(k) < n {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("every key delivered: a %d/40, b %d/3, c %d/3", s.got("a"), s.got("b"), s.got("c"))
	})
	txmqtest.WaitIdle(t, node)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Fatalf("per-key order broken: %v", s.bad)
	}
}

// counting wraps a backend, counts its Publish calls and does not close it (the caller does).
type counting struct {
	core.Backend
	publishes atomic.Int64
}

func (c *counting) Publish(ctx context.Context, b core.OutgoingBatch) error {
	c.publishes.Add(1)
	return c.Backend.Publish(ctx, b)
}

func (c *counting) Close() error { return nil }

// Unwrap returns the wrapped backend, so that its optional interfaces (core.KeyOrderer,
// core.KeyHolder) are found through the counter.
func (c *counting) Unwrap() core.Backend { return c.Backend }

func publish(t *testing.T, b core.Backend, batches ...core.OutgoingBatch) {
	t.Helper()
	for _, bt := range batches {
		if err := b.Publish(context.Background(), bt); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
}

// keyedBatch is a batch of one string message on an ordered queue with key.
func keyedBatch(queue, key, msg string) core.OutgoingBatch {
	b, _ := json.Marshal(msg)
	env := &envelope.Envelope{ID: core.NewID(), Queue: queue, Created: time.Now(), Key: key,
		MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{b}}
	return core.OutgoingBatch{ID: env.ID, Queue: queue, Body: envelope.Encode(env), Messages: 1, Key: key}
}

// keySeq records what the listener receives per key and flags a message that arrives before
// an earlier one of its key.
type keySeq struct {
	mu   sync.Mutex
	next map[string]int
	bad  []string
}

func (s *keySeq) record(msgs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		i := strings.LastIndexByte(m, '#')
		key := m[:i]
		seq, _ := strconv.Atoi(m[i+1:])
		switch {
		case seq == s.next[key]:
			s.next[key]++
		case seq > s.next[key]:
			s.bad = append(s.bad, fmt.Sprintf("%s before %s#%d", m, key, s.next[key]))
		}
	}
}

func (s *keySeq) got(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next[key]
}
