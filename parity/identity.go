package parity

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("identity",
		property{name: "ids_given_and_stable_across_runs", run: idsStable},
		property{name: "generated_ids_unique_and_time_ordered", run: idsGenerated},
	)
}

// idsStable: messages published with IDs reach the listener with those ids (MessageIDs, in the
// order of its slice), and a batch whose first run failed shows the same ids in its next run.
func idsStable(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3})
	n := x.node(txmq.NodeOptions{Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	var (
		mu   sync.Mutex
		runs = map[string][][]string{} // first key of the batch -> ids seen per run
		got  = map[string]string{}     // key -> id seen
	)
	err := q.Listen(n, func(ctx context.Context, msgs []Msg) error {
		ids := txmq.MessageIDs(ctx)
		if len(ids) != len(msgs) {
			x.T.Errorf("MessageIDs gave %d ids for %d messages", len(ids), len(msgs))
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		first := msgs[0].K
		runs[first] = append(runs[first], ids)
		for i, m := range msgs {
			got[m.K] = ids[i]
		}
		if len(runs[first]) == 1 {
			return fmt.Errorf("parity: first run fails on purpose")
		}
		return nil
	})
	if err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	want := map[string]string{}
	for c := range 4 {
		msgs := make([]Msg, 3)
		ids := make([]string, 3)
		for i := range msgs {
			msgs[i] = Msg{K: fmt.Sprintf("k%d-%d", c, i)}
			ids[i] = fmt.Sprintf("order-%d-%d/é", c, i)
			want[msgs[i].K] = ids[i]
		}
		if err := q.PublishMany(context.Background(), n, msgs, txmq.IDs(ids...)); err != nil {
			x.T.Fatalf("PublishMany with IDs: %v", err)
		}
	}
	if err := q.Publish(context.Background(), n, Msg{K: "bad"}, txmq.IDs("a", "b")); err == nil {
		x.T.Fatalf("Publish of one message with two ids was accepted; want an error naming the queue")
	}
	x.eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < len(want) {
			return false
		}
		for _, rs := range runs {
			if len(rs) < 2 {
				return false
			}
		}
		return true
	}, "every message seen and every batch run twice")
	mu.Lock()
	defer mu.Unlock()
	for k, id := range want {
		if got[k] != id {
			x.T.Errorf("message %s reached the listener with id %q, want %q (given with IDs)", k, got[k], id)
		}
	}
	for first, rs := range runs {
		for _, r := range rs[1:] {
			if !slices.Equal(r, rs[0]) {
				x.T.Errorf("batch of %s: ids %q in a later run, %q in the first", first, r, rs[0])
			}
		}
	}
}

// idsGenerated: messages published without ids get ids that are distinct and, for publish
// calls made one after the other, sort in publish order.
func idsGenerated(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	var (
		mu  sync.Mutex
		ids = map[string]string{}
	)
	err := q.Listen(n, func(ctx context.Context, msgs []Msg) error {
		got := txmq.MessageIDs(ctx)
		mu.Lock()
		defer mu.Unlock()
		for i, m := range msgs {
			if i < len(got) {
				ids[m.K] = got[i]
			}
		}
		return nil
	})
	if err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	const count = 20
	for i := range count {
		if err := q.Publish(context.Background(), n, Msg{K: fmt.Sprintf("g%02d", i)}); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	x.eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) == count }, "every message seen")
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	prev := ""
	for i := range count {
		id := ids[fmt.Sprintf("g%02d", i)]
		if id == "" || seen[id] {
			x.T.Fatalf("message g%02d has id %q: empty or given twice", i, id)
		}
		seen[id] = true
		if id <= prev {
			x.T.Errorf("message g%02d's id %q does not sort after the previous publish's %q", i, id, prev)
		}
		prev = id
	}
}
