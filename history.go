package txmq

import (
	"strconv"
	"time"
)

// MinuteRuns is what a node ran of one queue in one minute.
type MinuteRuns struct {
	// Minute is the start of the minute.
	Minute time.Time
	// Batches and Messages count the runs that ended in that minute and what they held.
	Batches, Messages int64
	// Failed counts the runs that failed (an error, a panic or a lost lease).
	Failed int64
}

// QueueInfo is a declared queue's settings, for operators.
type QueueInfo struct {
	// Name is the queue name.
	Name string
	// Transactional is the routing setting.
	Transactional Transactional
	// Exclusive: one batch in flight cluster-wide.
	Exclusive bool
	// MaxConcurrentBatches is the cap per node: "" for none, a number, or "func" for a CapFunc.
	MaxConcurrentBatches string
	// MaxBatchMessages and MaxAttempts are the queue's (defaults applied).
	MaxBatchMessages, MaxAttempts int
	// DeclaredAt is the source line of the declaration.
	DeclaredAt string
}

// Info returns the settings of the queue declared as name, and false if there is none.
func (r *Registry) Info(name string) (QueueInfo, bool) {
	s := r.lookup(name)
	if s == nil {
		return QueueInfo{}, false
	}
	info := QueueInfo{Name: s.Name, Transactional: s.tx, Exclusive: s.Exclusive, MaxBatchMessages: s.MaxBatch,
		MaxAttempts: s.MaxAttempts, DeclaredAt: s.site}
	switch {
	case s.key.capFunc:
		info.MaxConcurrentBatches = "func"
	case s.key.capN > 0:
		info.MaxConcurrentBatches = strconv.Itoa(s.key.capN)
	}
	return info, true
}
