package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("clock",
		property{name: "publisher_clock_behind_not_early", run: func(x *X) { skewedPublisher(x, -ClockSkewBound) }},
		property{name: "publisher_clock_ahead_on_time", run: func(x *X) { skewedPublisher(x, ClockSkewBound) }},
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
	sub := x.node(core.NodeOptions{})
	var (
		mu   sync.Mutex
		due  = map[string][2]time.Time{} // earliest allowed, latest expected (real time)
		seen = map[string]time.Time{}
		bad  []string
	)
	if err := q.Listen(sub, func(_ context.Context, msgs []Msg) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			d, ok := due[m.K]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s arrived before its publish call returned (or is unknown)", m.K))
			case now.Before(d[0]):
				bad = append(bad, fmt.Sprintf("%s arrived %v early (publisher clock off by %v)", m.K, d[0].Sub(now).Round(time.Millisecond), skew))
			}
			if _, ok := seen[m.K]; !ok {
				seen[m.K] = now
			}
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	cases := []struct {
		key string
		d   time.Duration
		at  bool
	}{
		{"after-1s", time.Second, false},
		{"after-3s", 3 * time.Second, false},
		{"at-2s", 2 * time.Second, true},
	}
	for _, c := range cases {
		opt := core.After(c.d)
		if c.at {
			opt = core.At(skewedClock(skew).Now().Add(c.d))
		}
		before := time.Now()
		mu.Lock()
		due[c.key] = [2]time.Time{before.Add(c.d), before.Add(time.Hour)}
		mu.Unlock()
		if err := q.Publish(context.Background(), pub, Msg{K: c.key}, opt); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		mu.Lock()
		due[c.key] = [2]time.Time{before.Add(c.d), time.Now().Add(c.d + x.Caps.DueTolerance)}
		mu.Unlock()
	}
	x.eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == len(cases)
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d of %d delayed messages from a publisher whose clock is off by %v arrived", len(seen), len(cases), skew)
	})
	x.idle(sub)
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		x.T.Errorf("%s", b)
	}
	for k, at := range seen {
		if late := at.Sub(due[k][1]); late > 0 {
			x.T.Errorf("%s arrived %v after its delay plus the tolerance %v (publisher clock off by %v)", k, late.Round(time.Millisecond), x.Caps.DueTolerance, skew)
		}
	}
}
