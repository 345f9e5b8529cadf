package parity

import (
	"context"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("pause",
		property{name: "no_start_while_paused", run: pauseNoStart},
	)
}

// pauseCheck is the pause properties' NodeOptions.PauseCheck.
const pauseCheck = 100 * time.Millisecond

// pauseNoStart: two nodes read their pauses from the app database. Once a queue is paused and
// PauseCheck plus a fetch have passed, no node starts a batch of it (published before or
// during the pause), while another queue goes on; after the resume every message is delivered.
func pauseNoStart(x *X) {
	s := x.store(x.rawClient(), outbox.Options{})
	x.needControl(s.Pauses() == nil, "Store.Pauses (the pause table)")
	paused := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	other := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	var (
		mu       sync.Mutex
		pausedAt time.Time // when the pause is in force (zero: not paused)
		bad      []string  // keys started while paused
	)
	rec, recOther := newRecorder(), newRecorder()
	opts := txmq.NodeOptions{Pauses: s.Pauses(), PauseCheck: pauseCheck}
	a, b := x.node(opts), x.node(opts)
	for _, n := range []*txmq.Node{a, b} {
		listen(x, rec, paused, n, func(_ context.Context, msgs []Msg) error {
			mu.Lock()
			defer mu.Unlock()
			if !pausedAt.IsZero() && time.Now().After(pausedAt) {
				for _, m := range msgs {
					bad = append(bad, m.K)
				}
			}
			return nil
		})
		listen(x, recOther, other, n, nil)
	}
	before := publishKeys(x, paused, a, "before", 5, 1)
	waitDelivered(x, rec, before)

	if err := s.Pauses().Pause(x.ctx(), paused.Name(), "parity"); err != nil {
		x.T.Fatalf("Pause: %v", err)
	}
	// In force on both nodes after PauseCheck plus one fetch (a fetch in flight is interrupted
	// when the pause is seen; its claims are given back unrun); a second more for a read of
	// the app database on a loaded machine.
	settle := 3*pauseCheck + x.Caps.PollWait + time.Second
	time.Sleep(settle)
	mu.Lock()
	pausedAt = time.Now()
	mu.Unlock()
	during := publishKeys(x, paused, b, "during", 10, 1)
	otherKeys := publishKeys(x, other, a, "other", 5, 1)
	waitDelivered(x, recOther, otherKeys) // the other queue goes on
	time.Sleep(2 * settle)
	mu.Lock()
	started := append([]string(nil), bad...)
	pausedAt = time.Time{}
	mu.Unlock()
	if len(started) > 0 {
		x.T.Fatalf("%d batches of the paused queue started while it was paused (first %s)", len(started), started[0])
	}
	if err := s.Pauses().Resume(x.ctx(), paused.Name()); err != nil {
		x.T.Fatalf("Resume: %v", err)
	}
	waitDelivered(x, rec, during)
}
