package reaper

import (
	"sync"
	"time"
)

// Heartbeats throttles the fetch heartbeats an adapter writes for the reaper (a row per queue
// saying when a node last fetched it): a queue's heartbeat is due again once the interval has
// passed since this process last wrote it. The zero value is ready; it is safe for concurrent
// use.
type Heartbeats struct {
	mu   sync.Mutex
	last map[string]time.Time // queue -> last heartbeat written
}

// Due returns those of queues whose heartbeat is due at now (none written within every), and
// counts them as written at now, so that concurrent fetches write each once.
func (h *Heartbeats) Due(queues []string, now time.Time, every time.Duration) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last = map[string]time.Time{}
	}
	var due []string
	for _, q := range queues {
		if now.Sub(h.last[q]) >= every {
			due = append(due, q)
			h.last[q] = now
		}
	}
	return due
}

// Failed forgets the heartbeats of queues, whose write failed, so that the next Due returns
// them again.
func (h *Heartbeats) Failed(queues []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range queues {
		delete(h.last, q)
	}
}
