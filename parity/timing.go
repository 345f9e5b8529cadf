package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register("time",
		property{name: "delayed_not_early", dup: true, run: delayedNotEarly},
		property{name: "scheduled_not_early", run: scheduledNotEarly},
		property{name: "delay_beyond_native_cap", run: delayBeyondNativeCap},
	)
}

// timed publishes messages with due times and checks, in the listener, that no copy of any of
// them runs before its due time, and at the end that each arrived within DueTolerance.
type timed struct {
	x    *X
	q    *core.Queue[Msg]
	n    *core.Node
	mu   sync.Mutex
	due  map[string][2]time.Time // earliest allowed, latest expected
	seen map[string]time.Time
	bad  []string
}

func newTimed(x *X) *timed {
	t := &timed{x: x, due: map[string][2]time.Time{}, seen: map[string]time.Time{}}
	t.q = declare(x, core.QueueConfig[Msg]{})
	t.n = x.node(core.NodeOptions{})
	if err := t.q.Listen(t.n, t.listen); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	return t
}

func (t *timed) listen(_ context.Context, msgs []Msg) error {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		d, ok := t.due[m.K]
		if !ok {
			t.bad = append(t.bad, fmt.Sprintf("unknown message %q", m.K))
			continue
		}
		if now.Before(d[0]) {
			t.bad = append(t.bad, fmt.Sprintf("%s arrived %v early", m.K, d[0].Sub(now)))
		}
		if _, ok := t.seen[m.K]; !ok {
			t.seen[m.K] = now
		}
	}
	return nil
}

// publish publishes key with the delay d (After) or at the time at (At, when d is 0).
func (t *timed) publish(key string, d time.Duration, at time.Time) {
	t.x.T.Helper()
	opt := core.At(at)
	if d > 0 {
		opt = core.After(d)
	}
	before := time.Now()
	lo := at
	if d > 0 {
		lo = before.Add(d)
	}
	t.mu.Lock()
	t.due[key] = [2]time.Time{lo, {}}
	t.mu.Unlock()
	if err := t.q.Publish(context.Background(), t.n, Msg{K: key}, opt); err != nil {
		t.x.T.Fatalf("Publish: %v", err)
	}
	after := time.Now()
	hi := at
	if d > 0 {
		hi = after.Add(d)
	}
	if hi.Before(after) {
		hi = after // a due time in the past means now
	}
	t.mu.Lock()
	t.due[key] = [2]time.Time{lo, hi.Add(t.x.Caps.DueTolerance)}
	t.mu.Unlock()
}

func (t *timed) wait() {
	t.x.T.Helper()
	t.mu.Lock()
	n := len(t.due)
	t.mu.Unlock()
	t.x.eventually(func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return len(t.seen) == n
	}, func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Sprintf("%d of %d timed messages arrived", len(t.seen), n)
	})
	t.x.idle(t.n)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.bad {
		t.x.T.Errorf("%s", b)
	}
	for k, at := range t.seen {
		if late := at.Sub(t.due[k][1]); late > 0 {
			t.x.T.Errorf("%s arrived %v after its due time plus the tolerance %v", k, late, t.x.Caps.DueTolerance)
		}
	}
}

// delayedNotEarly: messages published with core.After never run before their delay and
// arrive within DueTolerance of it.
func delayedNotEarly(x *X) {
	t := newTimed(x)
	for i, d := range []time.Duration{0, 300 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		t.publish(fmt.Sprintf("after-%d", i), d, time.Time{})
	}
	t.wait()
}

// scheduledNotEarly: messages published with core.At never run before their time; a time in
// the past means now.
func scheduledNotEarly(x *X) {
	t := newTimed(x)
	now := time.Now()
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(800 * time.Millisecond), now.Add(1200 * time.Millisecond)} {
		t.publish(fmt.Sprintf("at-%d", i), 0, at)
	}
	t.wait()
}

// delayBeyondNativeCap: a delay longer than the backend's native cap (Caps.MaxNativeDelay)
// is honoured, neither early nor lost; with no cap, a long delay is tested the same way.
func delayBeyondNativeCap(x *X) {
	t := newTimed(x)
	long := 3 * time.Second
	if c := x.Caps.MaxNativeDelay; c > 0 {
		long = c + 1500*time.Millisecond
		t.publish("twice-cap", 2*c+500*time.Millisecond, time.Time{})
		t.publish("at-beyond-cap", 0, time.Now().Add(c+time.Second))
	}
	t.publish("beyond-cap", long, time.Time{})
	t.wait()
}
