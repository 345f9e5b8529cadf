package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Hooks and Stats mirror txmq.Hooks and txmq.Stats field for field, so that each converts to
// the other (txmq.Hooks(h), engine.Stats(s)). They are mirrors, not the same type, because the
// app API documents its fields in its own package (go doc txmq) and the engine may not import
// it; txmq.Hooks and txmq.Stats document each field, and a field added there is added here.

// Hooks receives the engine's events, for metrics (txmq.Hooks). Every field is optional;
// panics are recovered and logged.
type Hooks struct {
	Published func(queue string, messages int)
	Delivered func(queue string, messages int, run int, took time.Duration, err error)
	Retried   func(queue string, run int, delay time.Duration)
	Dropped   func(queue string, reason string, messages int)
	HandedOff func(queue string, messages int)
	TimedOut  func(queue string, run int, stuck bool)
}

// Stats are an engine's counters since it was created (txmq.Stats).
type Stats struct {
	PublishedBatches, PublishedMessages int64
	Runs, Succeeded, Failed             int64
	Retried                             int64
	HandedOff                           int64
	Dropped                             map[string]int64
	Deduplicated                        int64
	LeaseLost                           int64
	TimedOut, Stuck                     int64
	InFlight                            int64
	Buffered                            int64
	EarlyArrivals                       int64
	Snoozed                             int64
}

// counters are the engine's counters as they run; Engine.Stats reads them.
type counters struct {
	publishedBatches, publishedMessages atomic.Int64
	runs, succeeded, failed, retried    atomic.Int64
	handedOff, leaseLost                atomic.Int64
	timedOut, stuck                     atomic.Int64
	early                               atomic.Int64
	deduplicated                        atomic.Int64
	snoozed                             atomic.Int64
	mu                                  sync.Mutex
	dropped                             map[string]int64
}

func (c *counters) drop(reason string) {
	c.mu.Lock()
	if c.dropped == nil {
		c.dropped = make(map[string]int64)
	}
	c.dropped[reason]++
	c.mu.Unlock()
}

// droppedTotal returns the batches dropped so far, whatever the reason.
func (c *counters) droppedTotal() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, v := range c.dropped {
		t += v
	}
	return t
}
