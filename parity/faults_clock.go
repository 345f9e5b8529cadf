package parity

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("clock",
		property{name: "publisher_clock_behind_not_early", run: func(x *X) { skewedPublisher(x, -ClockSkewBound) }},
		property{name: "publisher_clock_ahead_on_time", run: func(x *X) { skewedPublisher(x, ClockSkewBound) }},
		property{name: "outbox_delay_publisher_clock_behind_not_early", run: func(x *X) { skewedOutbox(x, -ClockSkewBound) }},
		property{name: "outbox_delay_publisher_clock_ahead_on_time", run: func(x *X) { skewedOutbox(x, ClockSkewBound) }},
	)
}

// ClockSkewBound is the app/backend (and node/node) clock difference the suite publishes
// under: txmq.MaxClockSkew, the bound txmq documents.
const ClockSkewBound = txmq.MaxClockSkew

// skewedClock is a node clock off by a fixed amount.
type skewedClock time.Duration

func (s skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// skewedPublisher: a node whose clock is off by skew publishes with After(d) and At(its now +
// d); a listening node with the true clock must not run any of them before d has passed in
// real time, and must run each within Caps.DueTolerance after it. A delay is relative to the
// publish and judged on one clock (the backend's), so the promise is the same whether the
// publisher's clock is behind (where an absolute due time would make it early) or ahead (where
// it would make it late by the skew): on time.
func skewedPublisher(x *X, skew time.Duration) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	pub := x.node(txmq.NodeOptions{Clock: skewedClock(skew)})
	a := newArrivals(x, q, x.node(txmq.NodeOptions{}), fmt.Sprintf(" (publisher clock off by %v)", skew))
	for _, c := range []struct {
		key string
		d   time.Duration
		at  bool
	}{
		{"after-1s", time.Second, false},
		{"after-3s", 3 * time.Second, false},
		{"at-2s", 2 * time.Second, true},
	} {
		opt := txmq.After(c.d)
		if c.at {
			opt = txmq.At(skewedClock(skew).Now().Add(c.d))
		}
		a.publish(c.key, c.d, func() error { return q.Publish(context.Background(), pub, Msg{K: c.key}, opt) })
	}
	a.wait()
}

// skewedOutbox: as skewedPublisher, for delayed messages that travel through the outbox: one
// published after commit by the committing process, one left in the outbox by a process that
// died after COMMIT and published later by another process's recovery sweep. The due time is
// kept on the app database's clock and the sweep passes on what is left of the delay.
func skewedOutbox(x *X, skew time.Duration) {
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	pub := x.node(txmq.NodeOptions{Clock: skewedClock(skew)})
	a := newArrivals(x, q, x.node(txmq.NodeOptions{}), fmt.Sprintf(" (publisher clock off by %v)", skew))
	live := x.store(x.rawClient(), outbox.Options{})
	dead := x.sameSchemaStore(live, unavailable{x.rawClient()}, outbox.Options{})
	sweeper := x.sameSchemaStore(live, x.rawClient(), outbox.Options{RecoveryAge: time.Millisecond})
	for _, c := range []struct {
		key string
		s   *outbox.Store
	}{{"commit-3s", live}, {"swept-3s", dead}} {
		a.publish(c.key, 3*time.Second, func() error {
			return runInTx(x.ctx(), c.s, func(ctx context.Context) error {
				return q.Publish(ctx, pub, Msg{K: c.key}, txmq.After(3*time.Second))
			})
		})
	}
	x.eventually(func() bool {
		if _, err := sweeper.SweepOnce(x.ctx()); err != nil {
			x.T.Logf("SweepOnce: %v", err)
		}
		return outboxRows(x, sweeper) == 0
	}, "the sweep publishes the row the dead process left")
	a.wait()
}
