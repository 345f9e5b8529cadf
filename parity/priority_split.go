package parity

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("priority",
		property{name: "split_part_keeps_priority", run: prioritySplitPart},
	)
}

// prioritySplitPart: where per-message outcomes meet priorities. A high-priority batch of two
// messages whose listener retries one of them (txmq.Results) is split, and the retried part
// keeps the batch's priority: it runs again ahead of the low-priority backlog that was due
// before it (aging of an hour), whether the backend stores the part with the claim's removal
// (core.Splitter) or the engine publishes it.
func prioritySplitPart(x *X) {
	x.needPriority()
	q := declare(x, txmq.QueueConfig[Msg]{Prioritized: true, Exclusive: true, MaxBatchMessages: 2, PriorityAging: time.Hour,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	pub := x.node(txmq.NodeOptions{})
	const low = 12
	for i := range low {
		if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprint("low-", i)}); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	if err := q.PublishMany(x.ctx(), pub, []Msg{{K: "high-a"}, {K: "high-b"}}, txmq.Priority(txmq.MaxPriority)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitDepth(x, q, func(d core.Depth) bool { return d.Ready >= low/2+1 }) // two messages a batch at most
	var l prioLog
	var split atomic.Bool
	if err := q.Listen(x.node(x.steadyLease()), func(_ context.Context, msgs []Msg) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			l.add(m.K)
			if m.K == "high-b" && split.CompareAndSwap(false, true) {
				res.Retry(i, errors.New("high-b fails its first run"))
			}
		}
		time.Sleep(20 * time.Millisecond)
		return res.Err()
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	x.eventually(func() bool { return len(l.snapshot()) >= low+3 }, "every message to run, high-b twice")
	ran := l.snapshot()
	var highB []int
	for i, k := range ran {
		if k == "high-b" {
			highB = append(highB, i)
		}
	}
	if len(highB) != 2 || highB[0] > 1 {
		x.T.Fatalf("run order %v: want the high batch first and high-b run twice", ran)
	}
	if between := highB[1] - highB[0] - 1; between > 4 {
		x.T.Fatalf("run order %v: %d low messages ran between high-b's runs; the part split off its batch lost its priority", ran, between)
	}
}
