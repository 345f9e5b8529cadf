package redis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// waker turns Redis Pub/Sub messages on the queues' wake channels into in-process wake-ups
// for waiting Fetch calls. One Backend holds one subscription connection however many fetches
// wait, so an idle node costs one idle connection and no polling beyond each Fetch's Wait.
//
// Wake-ups are a latency optimisation only, never needed for correctness: a waiting Fetch also
// wakes at its Wait and at the earliest due time or lease end its claim scripts reported, so a
// message lost while the subscription reconnects delays a pickup by at most one Wait. After any
// receive error and on every (re)subscription confirmation the waker wakes the waiting
// fetches, which look again.
type waker struct {
	rdb goredis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex
	ps      *goredis.PubSub
	subs    map[string]chan struct{}        // channel -> closed once the server confirmed it
	waiters map[string]map[*waiter]struct{} // channel -> fetches waiting on it
	closed  bool

	// The idle state of each channel's queue (see plan and rest), under mu.
	live  map[string]bool   // channel -> confirmed subscribed, with no receive error since
	gens  map[string]uint64 // channel -> wake-ups seen (any message, confirmation or error)
	quiet map[string]rest   // channel -> when its queue needs its next claim unless woken

	stop    context.CancelFunc
	loopCtx context.Context
}

// waiter is one waiting Fetch; ch has room for one wake-up so a wake never blocks.
type waiter struct{ ch chan struct{} }

// healthEvery is how long the subscription may stay silent before it is pinged; a connection
// that stays silent after the ping is replaced.
const healthEvery = 15 * time.Second

func newWaker(rdb goredis.UniversalClient, log *slog.Logger) *waker {
	ctx, cancel := context.WithCancel(context.Background())
	return &waker{
		rdb:     rdb,
		log:     log,
		subs:    make(map[string]chan struct{}),
		waiters: make(map[string]map[*waiter]struct{}),
		live:    make(map[string]bool),
		gens:    make(map[string]uint64),
		quiet:   make(map[string]rest),
		stop:    cancel,
		loopCtx: ctx,
	}
}

// register adds a waiter on channels.
func (w *waker) register(channels []string) *waiter {
	wt := &waiter{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range channels {
		m := w.waiters[ch]
		if m == nil {
			m = make(map[*waiter]struct{})
			w.waiters[ch] = m
		}
		m[wt] = struct{}{}
	}
	return wt
}

// unregister removes a waiter from channels.
func (w *waker) unregister(wt *waiter, channels []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range channels {
		if m := w.waiters[ch]; m != nil {
			delete(m, wt)
			if len(m) == 0 {
				delete(w.waiters, ch)
			}
		}
	}
}

// ensure subscribes to the channels not yet subscribed and waits, at most limit and while ctx
// lasts, until the server confirmed every one of them. Channels stay subscribed for the life
// of the Backend (a node fetches the same queues over and over). A failure is not an error:
// the fetch then relies on its timers until the subscription recovers.
func (w *waker) ensure(ctx context.Context, channels []string, limit time.Duration) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	var need []string
	var pending []chan struct{}
	for _, ch := range channels {
		ready, ok := w.subs[ch]
		if !ok {
			ready = make(chan struct{})
			w.subs[ch] = ready
			need = append(need, ch)
		}
		select {
		case <-ready:
		default:
			pending = append(pending, ready)
		}
	}
	start := false
	if len(need) > 0 && w.ps == nil {
		w.ps = w.rdb.Subscribe(w.loopCtx)
		start = true
	}
	ps := w.ps
	w.mu.Unlock()
	if len(need) > 0 {
		// go-redis remembers the channels even when the write fails and subscribes them again
		// on its next connection, whose confirmations close the ready channels.
		if err := ps.Subscribe(w.loopCtx, need...); err != nil {
			w.log.Debug("txmq redis: subscribing to wake-up channels failed; fetches poll until it recovers", "error", err)
		}
	}
	if start {
		go w.loop(ps)
	}
	if len(pending) == 0 || limit <= 0 {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	for _, ready := range pending {
		select {
		case <-ready:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-w.loopCtx.Done():
			return
		}
	}
}

// loop receives from the subscription until close.
func (w *waker) loop(ps *goredis.PubSub) {
	failures := 0
	silent := 0
	for w.loopCtx.Err() == nil {
		msg, err := ps.ReceiveTimeout(w.loopCtx, healthEvery)
		if err != nil {
			if w.loopCtx.Err() != nil {
				return
			}
			var nerr net.Error
			if errors.As(err, &nerr) && nerr.Timeout() {
				if silent == 0 {
					silent++
					_ = ps.Ping(w.loopCtx) // the Pong arrives through ReceiveTimeout
					continue
				}
				// No Pong either: a half-open connection. Start over on a new one.
				w.log.Debug("txmq redis: wake-up subscription silent after a ping; replacing its connection")
				if ps = w.replace(ps); ps == nil {
					return
				}
			}
			silent = 0
			failures++
			reloadSlots(w.rdb) // a cluster's subscription reconnects to the slot's current master
			if failures == 1 {
				w.log.Debug("txmq redis: wake-up subscription lost its connection; reconnecting", "error", err)
			}
			w.wakeAll() // something may have been published while we were not listening
			select {
			case <-time.After(min(time.Duration(failures)*50*time.Millisecond, time.Second)):
			case <-w.loopCtx.Done():
				return
			}
			continue
		}
		failures, silent = 0, 0
		switch m := msg.(type) {
		case *goredis.Message:
			w.wakeChannel(m.Channel)
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				w.mu.Lock()
				if ready, ok := w.subs[m.Channel]; ok {
					select {
					case <-ready:
					default:
						close(ready)
					}
					w.live[m.Channel] = true
				}
				w.mu.Unlock()
				w.wakeChannel(m.Channel) // after a reconnect: look again
			}
		}
	}
}

// replace closes ps and returns a new subscription to every channel subscribed so far, or
// nil after close.
func (w *waker) replace(ps *goredis.PubSub) *goredis.PubSub {
	_ = ps.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	channels := make([]string, 0, len(w.subs))
	for ch := range w.subs {
		channels = append(channels, ch)
	}
	w.ps = w.rdb.Subscribe(w.loopCtx, channels...)
	return w.ps
}

// wakeChannel wakes the fetches waiting on ch and ends the quiet of its queue.
func (w *waker) wakeChannel(ch string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gens[ch]++
	delete(w.quiet, ch)
	for wt := range w.waiters[ch] {
		select {
		case wt.ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll wakes every waiting fetch after a receive error: wake-ups may have been lost, so
// every queue is claimed again, and no queue is skipped (see plan) until the server confirms
// its channel again on the new connection.
func (w *waker) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		w.gens[ch]++
	}
	clear(w.quiet)
	clear(w.live)
	for _, m := range w.waiters {
		for wt := range m {
			select {
			case wt.ch <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the subscription.
func (w *waker) close() {
	w.mu.Lock()
	w.closed = true
	ps := w.ps
	w.mu.Unlock()
	w.stop()
	if ps != nil {
		_ = ps.Close()
	}
}

// rest is when a resting queue needs its next claim: at until at the latest, and from from
// on when claims of other queues run anyway (rechecks of idle queues ride along with each
// other's, instead of one round trip each).
type rest struct{ from, until time.Time }

// plan tells a Fetch which of its queues' claim scripts to run at now: skip[i] is true when
// channels[i] is confirmed subscribed and its queue rests past now (nothing can become
// claimable there without a wake-up), unless other queues are claimed now and its rest may
// end early (see rest). gens[i] is the channel's wake-up count, to hand back to rest. The
// skipped queues cost no command: this is what makes an idle node cheap.
func (w *waker) plan(channels []string, now time.Time) (skip []bool, gens []uint64) {
	skip = make([]bool, len(channels))
	gens = make([]uint64, len(channels))
	w.mu.Lock()
	defer w.mu.Unlock()
	claiming := false
	for i, ch := range channels {
		gens[i] = w.gens[ch]
		r, ok := w.quiet[ch]
		skip[i] = w.live[ch] && ok && r.until.After(now)
		claiming = claiming || !skip[i]
	}
	if claiming {
		for i, ch := range channels {
			if skip[i] && !w.quiet[ch].from.After(now) {
				skip[i] = false
			}
		}
	}
	return skip, gens
}

// rest records that the queue of ch needs no claim before r (an empty claim found nothing
// that becomes claimable earlier without a wake-up), unless a wake-up arrived since plan
// returned gen: then the queue stays due, so a wake-up racing the claim is never lost.
func (w *waker) rest(ch string, gen uint64, r rest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gens[ch] != gen {
		delete(w.quiet, ch)
		return
	}
	w.quiet[ch] = r
}

// busy ends the quiet of the queue of ch: its claim made claims or failed, so it is claimed
// again at the next look.
func (w *waker) busy(ch string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.quiet, ch)
}

// nextLook returns how long after now the first of channels' queues stops being quiet: 0
// when one is due now (never looked at, woken, or busy), negative when channels is empty.
func (w *waker) nextLook(channels []string, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := time.Duration(-1)
	for _, ch := range channels {
		d := max(w.quiet[ch].until.Sub(now), 0)
		if next < 0 || d < next {
			next = d
		}
	}
	return next
}
