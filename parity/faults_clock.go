package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
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
// under: core.MaxClockSkew, the bound txmq documents.
const ClockSkewBound = core.MaxClockSkew

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
	q := declare(x, core.QueueConfig[Msg]{})
	pub := x.node(core.NodeOptions{Clock: skewedClock(skew)})
	a := newArrivals(x, q, skew)
	for _, c := range []struct {
		key string
		d   time.Duration
		at  bool
	}{
		{"after-1s", time.Second, false},
		{"after-3s", 3 * time.Second, false},
		{"at-2s", 2 * time.Second, true},
	} {
		opt := core.After(c.d)
		if c.at {
			opt = core.At(skewedClock(skew).Now().Add(c.d))
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
	q := declare(x, core.QueueConfig[Msg]{Transactional: core.Require})
	pub := x.node(core.NodeOptions{Clock: skewedClock(skew)})
	a := newArrivals(x, q, skew)
	live := x.store(x.rawClient(), outbox.Options{})
	dead := x.sameSchemaStore(live, unavailable{x.rawClient()}, outbox.Options{})
	sweeper := x.sameSchemaStore(live, x.rawClient(), outbox.Options{RecoveryAge: time.Millisecond})
	for _, c := range []struct {
		key string
		s   *outbox.Store
	}{{"commit-3s", live}, {"swept-3s", dead}} {
		a.publish(c.key, 3*time.Second, func() error {
			return c.s.RunInTx(x.ctx(), func(ctx context.Context, _ pgx.Tx) error {
				return q.Publish(ctx, pub, Msg{K: c.key}, core.After(3*time.Second))
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

// arrivals records when a listening node with the true clock runs each delayed message.
type arrivals struct {
	x    *X
	sub  *core.Node
	skew time.Duration
	mu   sync.Mutex
	due  map[string][2]time.Time // earliest allowed, latest expected (real time)
	seen map[string]time.Time
	bad  []string
}

func newArrivals(x *X, q *core.Queue[Msg], skew time.Duration) *arrivals {
	a := &arrivals{x: x, sub: x.node(core.NodeOptions{}), skew: skew, due: map[string][2]time.Time{}, seen: map[string]time.Time{}}
	if err := q.Listen(a.sub, a.listen); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	return a
}

func (a *arrivals) listen(_ context.Context, msgs []Msg) error {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range msgs {
		d, ok := a.due[m.K]
		switch {
		case !ok:
			a.bad = append(a.bad, fmt.Sprintf("unknown message %q", m.K))
		case now.Before(d[0]):
			a.bad = append(a.bad, fmt.Sprintf("%s arrived %v early (publisher clock off by %v)", m.K, d[0].Sub(now).Round(time.Millisecond), a.skew))
		}
		if _, ok := a.seen[m.K]; !ok {
			a.seen[m.K] = now
		}
	}
	return nil
}

// publish runs fn, which publishes key with a delay of d (in real time from the call).
func (a *arrivals) publish(key string, d time.Duration, fn func() error) {
	a.x.T.Helper()
	before := time.Now()
	a.mu.Lock()
	a.due[key] = [2]time.Time{before.Add(d), before.Add(time.Hour)}
	a.mu.Unlock()
	if err := fn(); err != nil {
		a.x.T.Fatalf("publishing %s: %v", key, err)
	}
	a.mu.Lock()
	a.due[key] = [2]time.Time{before.Add(d), time.Now().Add(d + a.x.Caps.DueTolerance)}
	a.mu.Unlock()
}

// wait waits for every published message and checks their arrival times.
func (a *arrivals) wait() {
	x := a.x
	x.T.Helper()
	a.mu.Lock()
	n := len(a.due)
	a.mu.Unlock()
	x.eventually(func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.seen) == n
	}, func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		return fmt.Sprintf("%d of %d delayed messages from a publisher whose clock is off by %v arrived", len(a.seen), n, a.skew)
	})
	x.idle(a.sub)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.bad {
		x.T.Errorf("%s", b)
	}
	for k, at := range a.seen {
		if late := at.Sub(a.due[k][1]); late > 0 {
			x.T.Errorf("%s arrived %v after its delay plus the tolerance %v (publisher clock off by %v)", k, late.Round(time.Millisecond), x.Caps.DueTolerance, a.skew)
		}
	}
}
