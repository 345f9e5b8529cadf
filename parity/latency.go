package parity

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// The suite's measure of how loaded the machine is, for the properties that need a lease to be
// kept: a node must extend it in time, or a client give back what it holds before it runs
// out. A lease that is enough on a quiet machine is lost on one where other processes burn the
// CPU: a backend call or a timer a second late. Rather than a fixed lease every machine must
// keep, such properties take a lease derived from what the suite measured (keptLease).
//
// The meter is passive and shared by every suite of the test process (they share the machine):
// the calls of the nodes' clients that do not wait (Publish, Extend, Ack, Retry, Drop; see
// checked) report how long they took when they succeeded, and one goroutine reports how late
// a 50 ms timer fires. The latency is, over the last latencyWindow, the longest delay of a typical second: the 75th
// percentile of each second's longest delay, so that a few slow calls of another property's
// injected fault (a call that succeeded after its Restore, say) do not set it.

// latencyWindow is how far back the meter looks.
const latencyWindow = 30 * time.Second

// leasePerLatency is how many times the measured latency a kept lease is at least: a node
// extends a lease when two thirds of it are left, at its next tick (a sixth of the lease), and
// the extension must be confirmed before the lease's margin; a client that gives back a batch
// needs the receive's response and the give-back's round trip within the lease.
const leasePerLatency = 5

// meter keeps, per second of the window, the longest delay seen.
type meter struct {
	mu      sync.Mutex
	buckets [int(latencyWindow / time.Second)]struct {
		sec int64
		max time.Duration
	}
	once sync.Once
}

var machine meter

// note records one delay.
func (m *meter) note(d time.Duration) {
	now := time.Now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.buckets[now%int64(len(m.buckets))]
	if b.sec != now {
		b.sec, b.max = now, 0
	}
	b.max = max(b.max, d)
}

// recent returns the 75th percentile of the longest delays of the seconds of the last
// latencyWindow that noted any.
func (m *meter) recent() time.Duration {
	now := time.Now().Unix()
	m.mu.Lock()
	var maxima []time.Duration
	for _, b := range m.buckets {
		if now-b.sec < int64(len(m.buckets)) {
			maxima = append(maxima, b.max)
		}
	}
	m.mu.Unlock()
	if len(maxima) == 0 {
		return 0
	}
	slices.Sort(maxima)
	return maxima[len(maxima)*3/4]
}

// start starts the timer probe (once per process). It runs until the process ends: a
// goroutine asleep 50 ms at a time costs nothing measurable.
func (m *meter) start() {
	m.once.Do(func() {
		go func() {
			const tick = 50 * time.Millisecond
			for {
				before := time.Now()
				time.Sleep(tick)
				m.note(time.Since(before) - tick)
			}
		}()
	})
}

// latency is the delay the suite measured over the last latencyWindow (see meter.recent): of a
// backend call that does not wait, or of a timer firing late.
func (x *X) latency() time.Duration { return machine.recent() }

// keptLease is the lease for nodes and clients of a property that needs it kept: base, or
// leasePerLatency times the measured latency when that is longer, rounded up to whole seconds
// then (SQS leases are whole seconds), and at most a quarter of Caps.Timeout, so that the
// property's waits (Caps.Timeout) still hold a few leases.
// The first call for a base decides, after probing the backend (probe); later calls of the
// property return the same lease.
func (x *X) keptLease(base time.Duration) time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l, ok := x.kept[base]; ok {
		return l
	}
	x.probe()
	lease, lat := base, x.latency()
	if need := leasePerLatency * lat; need > base {
		lease = need.Truncate(time.Second)
		if lease < need {
			lease += time.Second
		}
		lease = max(min(lease, x.Caps.Timeout/4), base)
		x.T.Logf("parity[%s]: a lease of %v rather than %v: the machine's latency is %v", x.h.Name(), lease, base, lat.Round(time.Millisecond))
	}
	if x.kept == nil {
		x.kept = map[time.Duration]time.Duration{}
	}
	x.kept[base] = lease
	return lease
}

// window is a span of time within which a property must observe a state before the backend
// moves on by itself (a delayed message before it is due, a batch waiting to retry before its
// next run): base, or longer on a loaded machine, as keptLease decides.
func (x *X) window(base time.Duration) time.Duration { return x.keptLease(base) }

// probe measures the backend's latency now, with three Depths calls of a client of the
// property's Env (the meter may have nothing yet: the property may be the suite's first).
func (x *X) probe() {
	b := x.rawClient()
	q := x.queueName()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		_ = measured(func() error { _, err := b.Depths(ctx, []string{q}); return err })
		cancel()
	}
}

// measured reports to the meter how long call took, if it succeeded: a call that failed may
// have waited out an outage or a fault the property injected.
func measured(call func() error) error {
	start := time.Now()
	err := call()
	if err == nil {
		machine.note(time.Since(start))
	}
	return err
}

func (c *checked) Publish(ctx context.Context, b core.OutgoingBatch) error {
	return measured(func() error { return c.Backend.Publish(ctx, b) })
}

func (c *checked) Extend(ctx context.Context, cl *core.Claim, lease time.Duration) error {
	return measured(func() error { return c.Backend.Extend(ctx, cl, lease) })
}

func (c *checked) Ack(ctx context.Context, cl *core.Claim) error {
	return measured(func() error { return c.Backend.Ack(ctx, cl) })
}

func (c *checked) Retry(ctx context.Context, cl *core.Claim, body []byte, delay time.Duration) error {
	return measured(func() error { return c.Backend.Retry(ctx, cl, body, delay) })
}

func (c *checked) Drop(ctx context.Context, cl *core.Claim, reason string) error {
	return measured(func() error { return c.Backend.Drop(ctx, cl, reason) })
}
