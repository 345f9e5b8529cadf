package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds the per-message outcomes a listener can report (txmq.Results and the
// whole-batch marks Snooze and Discard), the drop reasons they add, and the optional Splitter
// capability that settles a split batch in one step.

// ReasonSnoozeExhausted: a message was snoozed more times than its queue allows
// (txmq.QueueConfig.MaxSnoozes, default DefaultMaxSnoozes): it is dead-lettered instead of
// snoozing for ever.
const ReasonSnoozeExhausted = "snooze_exhausted"

// ReasonDiscarded: the listener discarded messages (txmq.Discard, Results.Discard): done
// without a dead letter, counted by messages and logged with the listener's reason.
const ReasonDiscarded = "discarded"

// DefaultMaxSnoozes is how many times a message may be snoozed when its queue does not say.
const DefaultMaxSnoozes = 100

// OutcomeKind is what a listener asked for one message.
type OutcomeKind uint8

// The outcomes of a message, in the order a Results reports them.
const (
	// OutcomeDone: the message is done (acked); the zero value.
	OutcomeDone OutcomeKind = iota
	// OutcomeRetry: run again after the policy's backoff (or the outcome's delay), one run of
	// the budget spent.
	OutcomeRetry
	// OutcomeSnooze: run again after the outcome's delay, the run not spent (bounded by the
	// queue's snooze count).
	OutcomeSnooze
	// OutcomeDrop: dead-lettered now (reason ReasonPermanent), never retried.
	OutcomeDrop
	// OutcomeDiscard: done without a dead letter, counted (reason ReasonDiscarded).
	OutcomeDiscard
)

// String names the outcome as the logs, the ledger and derived batch ids do.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeSnooze:
		return "snooze"
	case OutcomeDrop:
		return "drop"
	case OutcomeDiscard:
		return "discard"
	}
	return fmt.Sprintf("outcome(%d)", uint8(k))
}

// Outcome is what a listener asked for one message of its batch.
type Outcome struct {
	// Kind is the outcome.
	Kind OutcomeKind
	// Delay is the wait before the next run (OutcomeSnooze, and OutcomeRetry with HasDelay).
	Delay time.Duration
	// HasDelay: an OutcomeRetry has its own Delay instead of the policy's backoff.
	HasDelay bool
	// Err is the listener's error (OutcomeRetry, OutcomeDrop).
	Err error
	// Reason is the listener's reason (OutcomeDiscard).
	Reason string
}

// Results is a listener's outcome per message: built by txmq.NewResults for the slice the
// listener received (every message done until marked), marked by index, and returned through
// Err. The marks are not safe for concurrent use: mark from one goroutine, or guard them.
type Results struct {
	n    int
	outs []Outcome // nil until a message is marked: every message done
}

// NewResults returns the Results of a batch of n messages, every one done.
func NewResults(n int) *Results { return &Results{n: max(n, 0)} }

// Len returns the number of messages the Results was built for.
func (r *Results) Len() int { return r.n }

// set records o for message i; an index outside the batch panics, as a slice index would (the
// listener's panic fails the run as a plain error).
func (r *Results) set(i int, o Outcome) *Results {
	if i < 0 || i >= r.n {
		panic(fmt.Sprintf("txmq: Results: message index %d out of range [0, %d)", i, r.n))
	}
	if r.outs == nil {
		r.outs = make([]Outcome, r.n)
	}
	r.outs[i] = o
	return r
}

// Done marks message i done again (undoing an earlier mark).
func (r *Results) Done(i int) *Results { return r.set(i, Outcome{}) }

// Retry marks message i to run again after the queue's backoff, one run of its budget spent;
// past the budget it is dead-lettered (reason delivery_exhausted).
func (r *Results) Retry(i int, err error) *Results {
	return r.set(i, Outcome{Kind: OutcomeRetry, Err: orRunError(err)})
}

// RetryAfter is Retry with its own delay d instead of the backoff (d < 0 is taken as 0).
func (r *Results) RetryAfter(i int, d time.Duration, err error) *Results {
	return r.set(i, Outcome{Kind: OutcomeRetry, Delay: max(d, 0), HasDelay: true, Err: orRunError(err)})
}

// Snooze marks message i to run again after d without spending a run of its budget (d < 0
// is taken as 0). A message snoozed more than its queue's MaxSnoozes times is dead-lettered
// (reason snooze_exhausted).
func (r *Results) Snooze(i int, d time.Duration) *Results {
	return r.set(i, Outcome{Kind: OutcomeSnooze, Delay: max(d, 0)})
}

// Drop marks message i as one no retry can fix: it is dead-lettered on this run (reason
// permanent) with err, and OnError is called with it.
func (r *Results) Drop(i int, err error) *Results {
	return r.set(i, Outcome{Kind: OutcomeDrop, Err: &PermanentError{Err: err}})
}

// Discard marks message i done without a dead letter: counted (reason discarded, by
// messages) and logged with reason.
func (r *Results) Discard(i int, reason string) *Results {
	return r.set(i, Outcome{Kind: OutcomeDiscard, Reason: reason})
}

// Outcome returns the outcome of message i (OutcomeDone for an index never marked).
func (r *Results) Outcome(i int) Outcome {
	if r.outs == nil || i < 0 || i >= len(r.outs) {
		return Outcome{}
	}
	return r.outs[i]
}

// Err returns nil when every message is done, else r as the listener's error.
func (r *Results) Err() error {
	for _, o := range r.outs {
		if o.Kind != OutcomeDone {
			return r
		}
	}
	return nil
}

// Error summarises the outcomes: how many messages took each path, and the first error.
func (r *Results) Error() string {
	var count [OutcomeDiscard + 1]int
	var first error
	for _, o := range r.outs {
		count[o.Kind]++
		if first == nil && o.Err != nil {
			first = o.Err
		}
	}
	if r.outs == nil {
		count[OutcomeDone] = r.n
	}
	s := fmt.Sprintf("txmq: results of %d messages: %d done, %d retry, %d snooze, %d drop, %d discard", r.n,
		count[OutcomeDone], count[OutcomeRetry], count[OutcomeSnooze], count[OutcomeDrop], count[OutcomeDiscard])
	if first != nil {
		s += "; first error: " + first.Error()
	}
	return s
}

// errRunFailed stands for a nil error given to Retry: a retried message still failed.
var errRunFailed = errors.New("txmq: the listener asked for a retry")

func orRunError(err error) error {
	if err == nil {
		return errRunFailed
	}
	return err
}

// SnoozeError is the whole-batch snooze a listener returns (txmq.Snooze): every message runs
// again after Delay, the run not spent.
type SnoozeError struct {
	// Delay is the wait before the next run; a negative Delay is taken as 0.
	Delay time.Duration
}

// Error says how long the batch is snoozed.
func (e *SnoozeError) Error() string { return fmt.Sprintf("txmq: snoozed for %v", e.Delay) }

// DiscardError is the whole-batch discard a listener returns (txmq.Discard): every message
// done without a dead letter, counted with Reason.
type DiscardError struct {
	// Reason is the listener's reason, logged.
	Reason string
}

// Error names the reason.
func (e *DiscardError) Error() string { return "txmq: discarded: " + e.Reason }

// ResultsOf returns the per-message outcomes err carries for a batch of n messages: a
// *Results, or a *SnoozeError or *DiscardError applied to every message, found in err's
// chain; nil when err carries none (a plain failure).
func ResultsOf(err error, n int) *Results {
	if err == nil {
		return nil
	}
	if r, ok := err.(*Results); ok { // the common shape: returned as is
		return r
	}
	var r *Results
	if errors.As(err, &r) {
		return r
	}
	var s *SnoozeError
	if errors.As(err, &s) {
		all := NewResults(n)
		for i := range n {
			all.Snooze(i, s.Delay)
		}
		return all
	}
	var d *DiscardError
	if errors.As(err, &d) {
		all := NewResults(n)
		for i := range n {
			all.Discard(i, d.Reason)
		}
		return all
	}
	return nil
}

// Part is one group of a split batch (see Splitter): an encoded batch to store, with its
// delay and attributes as for Publish.
type Part = OutgoingBatch

// Splitter is implemented by adapters that settle a split batch in one step: the parts stored
// and the claim removed atomically (one transaction, one script, one lock), so that a crash
// leaves either the claim (it runs again whole) or the parts, never both. Parts are unkeyed
// batches of the claim's queue (an ordered batch keeps its key's head through Retry instead:
// the engine never splits it into parts); an adapter refuses a keyed part with an error
// wrapping ErrInvalidConfig. Without it the engine publishes each part and then acks the claim; a crash between the
// two runs the whole batch again, which at-least-once allows, and the parts' derived batch ids
// let the dead-letter store recognise the second copy. Split on a claim whose lease was lost
// returns an error wrapping ErrLeaseLost and stores nothing. A wrapper that forwards Split to
// a backend without it returns an error wrapping errors.ErrUnsupported (and stores nothing):
// the engine then publishes the parts and acks. The parity group "outcomes" checks it.
type Splitter interface {
	// Split stores parts and removes the claim c in one atomic step.
	Split(ctx context.Context, c *Claim, parts []Part) error
}
