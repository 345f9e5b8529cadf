package txmq

import (
	"time"
)

// Hooks receives the engine's events, for metrics. Every field is optional; hooks must be fast
// and must not block. Panics in hooks are recovered and logged. The prometheus package bridges
// them to Prometheus metrics.
type Hooks struct {
	// Published is called after a batch was stored in the backend.
	Published func(queue string, messages int)
	// Delivered is called after a listener run, with its outcome (nil error on success).
	Delivered func(queue string, messages int, run int, took time.Duration, err error)
	// Retried is called when a failed batch is scheduled for another run after delay.
	Retried func(queue string, run int, delay time.Duration)
	// Dropped is called for every dropped batch with its reason (a Reason constant).
	Dropped func(queue string, reason string, messages int)
	// HandedOff is called when a buffered flush the backend refused went to the outbox.
	HandedOff func(queue string, messages int)
	// TimedOut is called when a run passes its queue's RunTimeout (stuck false: its ctx is
	// cancelled) and again if it has not returned after the grace (stuck true: the run is
	// declared failed, its slot freed and the batch retried or dead-lettered).
	TimedOut func(queue string, run int, stuck bool)
}

// Stats are a node's counters since it was created, for tests, the CLI and health checks.
type Stats struct {
	// PublishedBatches and PublishedMessages count what the node stored in the backend.
	PublishedBatches, PublishedMessages int64
	// Runs counts listener runs; Succeeded and Failed split them by outcome.
	Runs, Succeeded, Failed int64
	// Retried counts batches scheduled for another run.
	Retried int64
	// HandedOff counts batches handed to the outbox after the backend refused them.
	HandedOff int64
	// Dropped counts dropped batches by reason.
	Dropped map[string]int64
	// Deduplicated counts messages this node's flushes left out because their caller id had
	// already been published to the queue within its IDDedupWindow (the backend said so, or
	// the id came twice in one flush). Repeats the outbox leaves out are not counted here.
	Deduplicated int64
	// LeaseLost counts settles and extensions rejected with ErrLeaseLost.
	LeaseLost int64
	// TimedOut counts runs whose ctx was cancelled by their queue's RunTimeout; Stuck counts
	// those of them still running after the grace, declared failed without their return (the
	// log has each one's stack).
	TimedOut, Stuck int64
	// InFlight is the number of batches this node is running now.
	InFlight int64
	// Buffered is the number of messages waiting in the publish buffer.
	Buffered int64
	// EarlyArrivals counts batches the backend handed out well before they were due (beyond
	// the clock-skew allowance), which the node gave back without a run; nonzero means an adapter
	// bug.
	EarlyArrivals int64
	// Snoozed counts batches (whole or parts of a split) this node snoozed for a listener
	// (Snooze, Results.Snooze). Discarded messages are counted in Dropped under
	// ReasonDiscarded.
	Snoozed int64
}
