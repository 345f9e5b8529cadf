package parity

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("schedule",
		property{name: "each_tick_once_across_nodes_and_restarts", run: scheduleOnce},
	)
}

// countingPublisher counts the publishes of each message id: seen those that returned nil,
// tried every call (a call that timed out may still have stored the batch, which is then
// delivered before the outbox tries again).
type countingPublisher struct {
	core.Backend
	mu    sync.Mutex
	seen  map[string]int
	tried map[string]bool
}

func (c *countingPublisher) Publish(ctx context.Context, b core.OutgoingBatch) error {
	err := c.Backend.Publish(ctx, b)
	if e, derr := envelope.Decode(b.Body); derr == nil {
		c.mu.Lock()
		if c.tried == nil {
			c.tried = map[string]bool{}
		}
		for _, id := range e.MessageIDs {
			c.tried[id] = true
			if err == nil {
				c.seen[id]++
			}
		}
		c.mu.Unlock()
	}
	return err
}

// scheduleOnce: three nodes run a schedule ticking every second, through the app database;
// one of them is closed and replaced mid-run. Every tick from the first to the last is
// delivered (no tick skipped, the restart included), and each is published once.
func scheduleOnce(x *X) {
	pub := &countingPublisher{Backend: x.rawClient(), seen: map[string]int{}}
	s := x.store(pub, outbox.Options{})
	x.needControl(s.Ticks() == nil, "Store.Ticks (the schedule ticks)")
	if err := s.Start(x.ctx()); err != nil { // the relay and the sweep publish the ticks' rows
		x.T.Fatalf("Start: %v", err)
	}
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	name := "s" + q.Name()
	if err := q.Schedule(name, txmq.ScheduleConfig[Msg]{Cron: "@every 1s", Messages: func(tick time.Time) []Msg {
		return []Msg{{K: strconv.FormatInt(tick.Unix(), 10)}}
	}}); err != nil {
		x.T.Fatalf("Schedule: %v", err)
	}
	rec := newRecorder()
	opts := txmq.NodeOptions{Ticks: s.Ticks(), Handoff: s}
	nodes := []*txmq.Node{x.node(opts), x.node(opts), x.node(opts)}
	for _, n := range nodes {
		listen(x, rec, q, n, nil)
	}
	time.Sleep(3500 * time.Millisecond)
	if err := nodes[0].Close(context.Background()); err != nil {
		x.T.Fatalf("Close: %v", err)
	}
	listen(x, rec, q, x.node(opts), nil) // its replacement
	time.Sleep(3500 * time.Millisecond)
	for _, n := range nodes[1:] {
		_ = n.Close(context.Background())
	}
	// Ticks claimed before the closes are published by the relay and delivered.
	var ticks []int64
	x.eventually(func() bool {
		ticks = ticks[:0]
		for _, k := range rec.Keys() {
			v, err := strconv.ParseInt(k, 10, 64)
			if err == nil {
				ticks = append(ticks, v)
			}
		}
		sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
		return len(ticks) >= 5 && ticks[len(ticks)-1]-ticks[0]+1 == int64(len(ticks))
	}, func() string { return fmt.Sprintf("consecutive ticks delivered (have %v)", ticks) })
	pub.mu.Lock()
	defer pub.mu.Unlock()
	for id, n := range pub.seen {
		if n != 1 {
			x.T.Errorf("message %s published %d times, want once", id, n)
		}
	}
	// Every delivered tick came through the outbox's publishes (one message id per tick).
	if len(pub.tried) < len(ticks) {
		x.T.Errorf("%d ticks delivered but %d published", len(ticks), len(pub.tried))
	}
}
