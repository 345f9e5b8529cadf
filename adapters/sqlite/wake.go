package sqlite

import (
	"sync"
	"time"
)

// waker wakes a Backend's waiting fetches. SQLite has no NOTIFY: a publish, retry or release
// through this Backend signals its own waiting fetches of the queue at once, and every
// waiting fetch also wakes each Options.PollInterval to find what other processes stored.
type waker struct {
	mu      sync.Mutex
	waiting map[string]map[*waiter]struct{}
}

// waiter is one waiting Fetch.
type waiter struct {
	ch    chan struct{} // one pending wake-up at most
	timer *time.Timer   // the poll
}

func newWaker() *waker { return &waker{waiting: map[string]map[*waiter]struct{}{}} }

// register makes a waiter for queues; unregister it when the Fetch ends.
func (k *waker) register(queues []string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, q := range queues {
		m := k.waiting[q]
		if m == nil {
			m = map[*waiter]struct{}{}
			k.waiting[q] = m
		}
		m[w] = struct{}{}
	}
	return w
}

// unregister removes w and stops its poll.
func (k *waker) unregister(w *waiter, queues []string) {
	k.mu.Lock()
	for _, q := range queues {
		if m := k.waiting[q]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(k.waiting, q)
			}
		}
	}
	k.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

// signal wakes every fetch of this Backend waiting for queue.
func (k *waker) signal(queue string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for w := range k.waiting[queue] {
		w.poke()
	}
}

// poke leaves a wake-up for w unless one is pending.
func (w *waiter) poke() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// arm schedules the next poll in every and returns the channel a wake-up arrives on.
func (w *waiter) arm(every time.Duration) <-chan struct{} {
	if w.timer == nil {
		w.timer = time.AfterFunc(every, w.poke)
	} else {
		w.timer.Reset(every)
	}
	return w.ch
}
