package engine

import (
	"sync"
	"time"
)

// historyMinutes is how many minutes of run counts a node keeps per queue.
const historyMinutes = 60

// MinuteRuns is what a node ran of one queue in one minute (txmq.MinuteRuns, which documents
// the fields).
type MinuteRuns struct {
	// Minute is the start of the minute.
	Minute time.Time
	// Batches and Messages count the runs that ended in that minute and what they held.
	Batches, Messages int64
	// Failed counts the runs that failed (an error, a panic or a lost lease).
	Failed int64
}

// runHistory is a ring of per-minute run counts of one queue on one node.
type runHistory struct {
	mu      sync.Mutex
	buckets [historyMinutes]MinuteRuns
}

func (h *runHistory) add(now time.Time, messages int, failed bool) {
	m := now.Truncate(time.Minute)
	i := (m.Unix() / 60) % historyMinutes
	h.mu.Lock()
	b := &h.buckets[i]
	if !b.Minute.Equal(m) {
		*b = MinuteRuns{Minute: m}
	}
	b.Batches++
	b.Messages += int64(messages)
	if failed {
		b.Failed++
	}
	h.mu.Unlock()
}

// last returns the last historyMinutes minutes up to now, oldest first, zero counts included.
func (h *runHistory) last(now time.Time) []MinuteRuns {
	end := now.Truncate(time.Minute)
	out := make([]MinuteRuns, historyMinutes)
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range historyMinutes {
		m := end.Add(-time.Duration(historyMinutes-1-k) * time.Minute)
		out[k] = MinuteRuns{Minute: m}
		if b := h.buckets[(m.Unix()/60)%historyMinutes]; b.Minute.Equal(m) {
			out[k] = b
		}
	}
	return out
}

// RunHistory returns what this node ran of queue in each of the last 60 minutes, oldest first
// (the current minute last, so far); nil when the node does not listen to queue. For dashboards.
func (n *Engine) RunHistory(queue string) []MinuteRuns {
	n.mu.Lock()
	l := n.listeners[queue]
	n.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.history.last(time.Now())
}
