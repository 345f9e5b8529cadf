// Package pollwake wakes an adapter's waiting fetches when its backend has no push of its own
// (MySQL and SQLite have no NOTIFY): a publish, retry or release through the adapter signals
// its own waiting fetches of the queue at once, and every waiting fetch also wakes each poll
// interval to find what other processes stored. The SQL adapters on MySQL and SQLite share it.
package pollwake

import (
	"sync"
	"time"
)

// Waker holds the waiting fetches of one adapter, by queue. The zero value is not usable: use
// New.
type Waker struct {
	mu      sync.Mutex
	waiting map[string]map[*Waiter]struct{}
}

// Waiter is one waiting Fetch.
type Waiter struct {
	ch    chan struct{} // one pending wake-up at most
	timer *time.Timer   // the poll
}

// New returns an empty Waker.
func New() *Waker { return &Waker{waiting: map[string]map[*Waiter]struct{}{}} }

// Register makes a waiter for queues, before the fetch's first claim so that no signal falls
// in between; Unregister it when the Fetch ends.
func (k *Waker) Register(queues []string) *Waiter {
	w := &Waiter{ch: make(chan struct{}, 1)}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, q := range queues {
		m := k.waiting[q]
		if m == nil {
			m = map[*Waiter]struct{}{}
			k.waiting[q] = m
		}
		m[w] = struct{}{}
	}
	return w
}

// Unregister removes w and stops its poll.
func (k *Waker) Unregister(w *Waiter, queues []string) {
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

// Signal wakes every fetch waiting for queue.
func (k *Waker) Signal(queue string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for w := range k.waiting[queue] {
		w.poke()
	}
}

// poke leaves a wake-up for w unless one is pending.
func (w *Waiter) poke() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Arm schedules the next poll in every and returns the channel a wake-up arrives on (a
// Signal or the poll, whichever comes first).
func (w *Waiter) Arm(every time.Duration) <-chan struct{} {
	if w.timer == nil {
		w.timer = time.AfterFunc(every, w.poke)
	} else {
		w.timer.Reset(every)
	}
	return w.ch
}
