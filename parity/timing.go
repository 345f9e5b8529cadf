package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("time",
		property{name: "delayed_not_early", dup: true, run: delayedNotEarly},
		property{name: "scheduled_not_early", run: scheduledNotEarly},
		property{name: "delay_beyond_native_cap", run: delayBeyondNativeCap},
	)
}

// arrivals records when a listening node runs each delayed message: the listener checks that
// no copy runs before its earliest allowed time (real time), and wait that each arrived by its
// latest expected time plus DueTolerance. note says, in failures, what the property varies.
type arrivals struct {
	x    *X
	sub  *txmq.Node
	note string
	mu   sync.Mutex
	due  map[string][2]time.Time // earliest allowed, latest expected (real time)
	seen map[string]time.Time
	bad  []string
}

// newArrivals listens on q with sub and records the arrivals.
func newArrivals(x *X, q *txmq.Queue[Msg], sub *txmq.Node, note string) *arrivals {
	a := &arrivals{x: x, sub: sub, note: note, due: map[string][2]time.Time{}, seen: map[string]time.Time{}}
	if err := q.Listen(sub, a.listen); err != nil {
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
			continue
		case now.Before(d[0]):
			a.bad = append(a.bad, fmt.Sprintf("%s arrived %v early%s", m.K, d[0].Sub(now).Round(time.Millisecond), a.note))
		}
		if _, ok := a.seen[m.K]; !ok {
			a.seen[m.K] = now
		}
	}
	return nil
}

// publishDue runs fn, which publishes key, allowed to run from lo(before) and expected by
// hi(after) plus DueTolerance, before and after being the real time around the call.
func (a *arrivals) publishDue(key string, fn func() error, lo func(before time.Time) time.Time, hi func(after time.Time) time.Time) {
	a.x.T.Helper()
	before := time.Now()
	a.mu.Lock()
	a.due[key] = [2]time.Time{lo(before), before.Add(time.Hour)}
	a.mu.Unlock()
	if err := fn(); err != nil {
		a.x.T.Fatalf("publishing %s: %v", key, err)
	}
	a.mu.Lock()
	a.due[key] = [2]time.Time{lo(before), hi(time.Now()).Add(a.x.Caps.DueTolerance)}
	a.mu.Unlock()
}

// publish runs fn, which publishes key with a delay of d (in real time from the call).
func (a *arrivals) publish(key string, d time.Duration, fn func() error) {
	a.x.T.Helper()
	a.publishDue(key, fn, func(b time.Time) time.Time { return b.Add(d) }, func(t time.Time) time.Time { return t.Add(d) })
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
		return fmt.Sprintf("%d of %d delayed messages arrived%s", len(a.seen), n, a.note)
	})
	x.idle(a.sub)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.bad {
		x.T.Errorf("%s", b)
	}
	// A claim the listening node could not keep (a lease lost to a loaded machine: the claim
	// reached its worker past its fence, or its extension came too late) comes back after at
	// most its lease: each one the node reports adds a lease to the tolerance.
	// On a loaded machine the due time's timer fires late and the claim's round trip is slow,
	// each by about the latency the suite measured (see meter): twice that is added too.
	lost := a.sub.Stats().LeaseLost
	lat := 2 * x.latency()
	slack := time.Duration(lost)*x.Caps.Lease + lat
	for k, at := range a.seen {
		if late := at.Sub(a.due[k][1].Add(slack)); late > 0 {
			x.T.Errorf("%s arrived %v after its due time plus the tolerance %v (and %v for the %d leases the listening node lost, %v for twice the measured latency)%s", k, late.Round(time.Millisecond), x.Caps.DueTolerance, slack-lat, lost, lat.Round(time.Millisecond), a.note)
		}
	}
	if lost > 0 {
		x.T.Logf("the listening node lost %d leases (a loaded machine): the arrival tolerance grew by %v", lost, slack)
	}
}

// timed is one node that publishes messages with due times and receives them (arrivals).
type timed struct {
	*arrivals
	q *txmq.Queue[Msg]
	n *txmq.Node
}

func newTimed(x *X) *timed {
	q := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	return &timed{arrivals: newArrivals(x, q, n, ""), q: q, n: n}
}

// publishAt publishes key with the delay d (After) or at the time at (At, when d is 0).
func (t *timed) publishAt(key string, d time.Duration, at time.Time) {
	t.x.T.Helper()
	fn := func(opt txmq.PublishOption) func() error {
		return func() error { return t.q.Publish(context.Background(), t.n, Msg{K: key}, opt) }
	}
	if d > 0 {
		t.publish(key, d, fn(txmq.After(d)))
		return
	}
	// A due time in the past means now.
	t.publishDue(key, fn(txmq.At(at)), func(time.Time) time.Time { return at },
		func(after time.Time) time.Time { return later(at, after) })
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// delayedNotEarly: messages published with txmq.After never run before their delay and
// arrive within DueTolerance of it.
func delayedNotEarly(x *X) {
	t := newTimed(x)
	for i, d := range []time.Duration{0, 300 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		t.publishAt(fmt.Sprintf("after-%d", i), d, time.Time{})
	}
	t.wait()
}

// scheduledNotEarly: messages published with txmq.At never run before their time; a time in
// the past means now.
func scheduledNotEarly(x *X) {
	t := newTimed(x)
	now := time.Now()
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(800 * time.Millisecond), now.Add(1200 * time.Millisecond)} {
		t.publishAt(fmt.Sprintf("at-%d", i), 0, at)
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
		t.publishAt("twice-cap", 2*c+500*time.Millisecond, time.Time{})
		t.publishAt("at-beyond-cap", 0, time.Now().Add(c+time.Second))
	}
	t.publishAt("beyond-cap", long, time.Time{})
	t.wait()
}
