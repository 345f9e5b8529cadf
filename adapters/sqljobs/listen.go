package sqljobs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is a Backend's one LISTEN connection, shared by every waiting Fetch. It is opened
// by the first Fetch that waits, outside the pool (with Options.ListenURL's connection
// settings when set, else the pool's; never with PgBouncer and no ListenURL), and
// reopened with backoff when it breaks. A NOTIFY's payload is a queue name; it wakes the
// fetches waiting on that queue. A (re)connect wakes every waiting fetch, because
// notifications sent while it was down are lost.
type listener struct {
	be *Backend

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // queue -> fetches waiting on it
	all     map[*waiter]struct{}
	started bool
	stopped bool
	cancel  context.CancelFunc

	up atomic.Bool // LISTEN is in effect
}

// waiter is one waiting Fetch; ch has room for one wake-up.
type waiter struct{ ch chan struct{} }

func newListener(be *Backend) *listener {
	return &listener{be: be, waiters: map[string]map[*waiter]struct{}{}, all: map[*waiter]struct{}{}}
}

// register adds a waiting fetch on queues, starting the listener on first use.
func (l *listener) register(queues []string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range queues {
		set := l.waiters[q]
		if set == nil {
			set = map[*waiter]struct{}{}
			l.waiters[q] = set
		}
		set[w] = struct{}{}
	}
	l.all[w] = struct{}{}
	if !l.started && !l.stopped {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		l.be.wg.Add(1)
		go l.run(ctx)
	}
	return w
}

// unregister removes a waiting fetch.
func (l *listener) unregister(w *waiter, queues []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range queues {
		if set := l.waiters[q]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(l.waiters, q)
			}
		}
	}
	delete(l.all, w)
}

// healthy reports whether LISTEN is in effect, so a fetch can trust NOTIFY to wake it.
func (l *listener) healthy() bool { return l.up.Load() }

// stop ends the listener; Close waits for it through Backend.wg.
func (l *listener) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.cancel != nil {
		l.cancel()
	}
}

// wake wakes the fetches waiting on queue.
func (l *listener) wake(queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.waiters[queue] {
		poke(w)
	}
}

// wakeAll wakes every waiting fetch.
func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.all {
		poke(w)
	}
}

func poke(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// run keeps a LISTEN connection open until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer l.be.wg.Done()
	const minBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		err := l.session(ctx, func() {
			backoff = minBackoff
			if failing {
				l.be.o.Logger.Info("sqljobs: LISTEN connection restored", "channel", l.be.channel)
				failing = false
			}
		})
		if ctx.Err() != nil {
			return
		}
		if !failing {
			l.be.o.Logger.Warn("sqljobs: LISTEN connection lost; fetches poll until it is back", "channel", l.be.channel, "error", classify("listen", err))
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// session opens one LISTEN connection and dispatches its notifications until it fails;
// connected is called once LISTEN is in effect.
func (l *listener) session(ctx context.Context, connected func()) error {
	cfg := l.be.listenConfig
	if cfg == nil {
		cfg = l.be.pool.Config().ConnConfig
	}
	cfg = cfg.Copy()
	cctx, cancel := context.WithTimeout(ctx, l.be.o.QueryTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.be.channel}.Sanitize())
	}
	cancel()
	if conn != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = conn.Close(cctx)
		}()
	}
	if err != nil {
		return err
	}
	l.up.Store(true)
	defer l.up.Store(false)
	connected()
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.wake(n.Payload)
	}
}
