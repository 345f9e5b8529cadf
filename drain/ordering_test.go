package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/drain/draintest"
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

// TestOrderedOldBackendFirstPerKey: keys "a" and "b" have batches left in the old backend;
// new batches of them are published behind those (to the old backend), key "c" (nothing
// left in the old one) goes to the primary, and a listener over the wrapper gets every key
// in publish order, also while the old backend empties during the publishes.
func TestOrderedOldBackendFirstPerKey(t *testing.T) {
	t.Parallel()
	draintest.OrderedOldFirst(t, newMemory(t), newMemory(t))
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
