package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

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

// TestOrderedOldBackendFirstPerKey: keys "a" and "b" have batches left in the old backend;
// new batches of them are published behind those (to the old backend), key "c" (nothing
// left in the old one) goes to the primary, and a listener over the wrapper gets every key
// in publish order, also while the old backend empties during the publishes.
func TestOrderedOldBackendFirstPerKey(t *testing.T) {
	t.Parallel()
	orderedOldFirst(t, newMemory(t), newMemory(t))
}

// TestOrderedOldBackendFirstReal: orderedOldFirst from SQL jobs to Redis and back, each
// reached through its URL.
func TestOrderedOldBackendFirstReal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	pool := testenv.PostgresPool(t)
	sqlURL := func() string {
		return testenv.PostgresURL(t) + sep(testenv.PostgresURL(t)) + "txmq_schema=" + testenv.PostgresSchema(t, pool)
	}
	redisURL := func() string {
		return testenv.RedisURL(t) + sep(testenv.RedisURL(t)) + "txmq_prefix=" + testenv.UniqueName("drainorder")
	}
	open := func(t *testing.T, u string) core.Backend {
		t.Helper()
		be, err := core.OpenBackend(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	t.Run("sqljobs to redis", func(t *testing.T) {
		t.Parallel()
		orderedOldFirst(t, open(t, redisURL()), open(t, sqlURL()))
	})
	t.Run("redis to sqljobs", func(t *testing.T) {
		t.Parallel()
		orderedOldFirst(t, open(t, sqlURL()), open(t, redisURL()))
	})
}

// orderedOldFirst is TestOrderedOldBackendFirstPerKey's scenario on newBe (primary) and oldBe.
func orderedOldFirst(t *testing.T, newBe, oldBe core.Backend) {
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
		t.Fatalf("OrdersKeys of a memory-to-memory drain: %v", err)
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

// TestOrdersKeysRefusals: the wrapper orders keys only with one old backend that can tell
// whether it holds a key.
func TestOrdersKeysRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		old  []core.Backend
		want string
	}{
		{"no old backend", nil, ""},
		{"one memory backend", []core.Backend{memory.New(nil)}, ""},
		{"two old backends", []core.Backend{memory.New(nil), memory.New(nil)}, "one old backend at a time"},
		{"old without KeyHolder", []core.Backend{noHolder{memory.New(nil)}}, "core.KeyHolder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := drain.New(memory.New(nil), c.old, &drain.Options{Logger: txmqtest.DiscardLogger()})
			t.Cleanup(func() { _ = d.Close() })
			err := core.OrdersKeys(d)
			if c.want == "" {
				if err != nil {
					t.Fatalf("OrdersKeys: %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OrdersKeys: %v; want ErrInvalidConfig saying %q", err, c.want)
			}
		})
	}
}

// noHolder orders keys but cannot tell whether it holds one.
type noHolder struct{ core.Backend }

func (noHolder) OrdersKeys() error { return nil }

// TestOrderedPublishOldUnreachable: while the old backend is unreachable a keyed batch cannot
// be placed (its Publish fails as unavailable, so a node hands it to the outbox), while an
// unkeyed batch still goes to the primary; once the old backend is back, keyed ones flow.
func TestOrderedPublishOldUnreachable(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	d := drain.New(&counting{Backend: primary}, []core.Backend{&counting{Backend: old}}, &drain.Options{Logger: txmqtest.DiscardLogger()})
	t.Cleanup(func() { _ = d.Close() })
	name := testenv.UniqueName("ordered")
	old.Break()
	if err := d.Publish(context.Background(), keyedBatch(name, "k", "k#0")); !errors.Is(err, core.ErrBackendUnavailable) || !strings.Contains(err.Error(), name) {
		t.Fatalf("keyed Publish with the old backend down: %v; want ErrBackendUnavailable naming queue %q", err, name)
	}
	if err := d.Publish(context.Background(), rawBatch(name+"-plain", false, "x")); err != nil {
		t.Fatalf("unkeyed Publish with the old backend down: %v", err)
	}
	old.Restore()
	if err := d.Publish(context.Background(), keyedBatch(name, "k", "k#0")); err != nil {
		t.Fatalf("keyed Publish once the old backend is back: %v", err)
	}
	if got := depth(t, primary, name); got.Ready != 1 {
		t.Fatalf("primary depth of %q: %+v; want the keyed batch ready there (the old backend holds nothing of it)", name, got)
	}
}
