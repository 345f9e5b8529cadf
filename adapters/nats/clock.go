package nats

import (
	"context"
	"sync"
	"time"
)

// serverClockRefresh is how long one reading of the server's clock is used before the next
// delayed publish reads it again. Between readings the estimate advances by this process's
// monotonic clock, which wall-clock steps do not move; the refresh follows the server's.
const serverClockRefresh = 30 * time.Second

// driftAllowance bounds the rate difference between this process's monotonic clock and the
// server's (1/driftAllowance, 1000 ppm): an extrapolated reading is pushed ahead by that much,
// so a local clock that runs slower than the server's cannot make a schedule early.
const driftAllowance = 1000

// serverClock is a reading of the NATS server's wall clock (the clock JetStream message
// schedules fire by), taken from a stream info's "ts", with the local monotonic time at which
// the request was sent.
type serverClock struct {
	mu   sync.Mutex
	ts   time.Time // the server's clock in the last stream info
	sent time.Time // time.Now() just before that request (kept with its monotonic reading)
	recv time.Time // time.Now() just after its response
}

// serverNow returns a time not before the clock of the server that runs q's stream (its
// leader, in a cluster: the one that fires its schedules) now: the server's time in a recent
// stream info plus the monotonic time elapsed since that request was sent, plus the drift
// allowance (the server read its clock after the request left, so the estimate is ahead by at
// most one round trip and 30 ms, which makes a schedule at most that late, never early). A
// server whose stream info carries no time (before nats-server 2.10, which has no message
// schedules either) falls back to this process's clock.
func (be *Backend) serverNow(ctx context.Context, q *queueState) (time.Time, error) {
	c := &q.clock
	c.mu.Lock()
	if age := time.Since(c.sent); !c.sent.IsZero() && age < serverClockRefresh {
		now := c.ts.Add(age + age/driftAllowance)
		c.mu.Unlock()
		return now, nil
	}
	c.mu.Unlock()
	ts, sent, _, err := be.readServerClock(ctx, q)
	if err != nil {
		return time.Time{}, err
	}
	if ts.IsZero() {
		return time.Now(), nil
	}
	return ts.Add(time.Since(sent)), nil
}

// readServerClock asks for q's stream info and seeds q's clock with its time: ts is the
// server's clock (zero from a server whose stream info carries none), sent and recv the local
// times around the request.
func (be *Backend) readServerClock(ctx context.Context, q *queueState) (ts, sent, recv time.Time, err error) {
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	sent = time.Now()
	info, err := q.stream.Info(cctx)
	if err != nil {
		return time.Time{}, time.Time{}, time.Time{}, err
	}
	recv = time.Now()
	q.clock.seed(info.TimeStamp, sent, recv)
	return info.TimeStamp, sent, recv, nil
}

// serverNowLow returns a time not after the clock of the server that runs q's stream now: the
// server's time in a recent stream info plus the monotonic time elapsed since its response
// came back, less the drift allowance (the server read its clock before the response left).
// It judges whether a keyed batch is due (see ordering.go): a lower bound can only make the
// batch wait longer, never run early. Without a reading of its own (an old server) it uses
// this process's clock.
func (be *Backend) serverNowLow(ctx context.Context, q *queueState) (time.Time, error) {
	c := &q.clock
	c.mu.Lock()
	fresh := !c.recv.IsZero() && time.Since(c.sent) < serverClockRefresh
	ts, recv := c.ts, c.recv
	c.mu.Unlock()
	if !fresh {
		var err error
		if ts, _, recv, err = be.readServerClock(ctx, q); err != nil {
			return time.Time{}, err
		}
		if ts.IsZero() {
			return time.Now(), nil
		}
	}
	age := time.Since(recv)
	return ts.Add(age - age/driftAllowance), nil
}

// seed records a reading of the server's clock, ts, from a response to a request sent at
// sent and received at recv (local, with their monotonic readings); a zero ts (an old server)
// is ignored.
func (c *serverClock) seed(ts, sent, recv time.Time) {
	if ts.IsZero() {
		return
	}
	c.mu.Lock()
	c.ts, c.sent, c.recv = ts, sent, recv
	c.mu.Unlock()
}
