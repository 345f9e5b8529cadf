package txmq

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Results is a listener's outcome per message of its batch (see "Outcomes" in the package
// doc): build it with NewResults on the slice the listener received, mark messages by index
// (Retry, RetryAfter, Snooze, Drop, Discard; unmarked ones are done), and return res.Err().
// An index outside the slice panics, which fails the run as a plain error.
type Results = core.Results

// Outcome is what a listener asked for one message (Results.Outcome).
type Outcome = core.Outcome

// OutcomeKind names an Outcome: OutcomeDone, OutcomeRetry, OutcomeSnooze, OutcomeDrop or
// OutcomeDiscard.
type OutcomeKind = core.OutcomeKind

// The outcomes of a message.
const (
	OutcomeDone    = core.OutcomeDone
	OutcomeRetry   = core.OutcomeRetry
	OutcomeSnooze  = core.OutcomeSnooze
	OutcomeDrop    = core.OutcomeDrop
	OutcomeDiscard = core.OutcomeDiscard
)

// SnoozeError is the error Snooze returns; errors.As finds it in a listener's error.
type SnoozeError = core.SnoozeError

// DiscardError is the error Discard returns; errors.As finds it in a listener's error.
type DiscardError = core.DiscardError

// DefaultMaxSnoozes is how many times a message may be snoozed when its queue's MaxSnoozes is 0.
const DefaultMaxSnoozes = core.DefaultMaxSnoozes

// ReasonSnoozeExhausted: a message was snoozed more than its queue's MaxSnoozes times; it was
// dead-lettered.
const ReasonSnoozeExhausted = core.ReasonSnoozeExhausted

// ReasonDiscarded: the listener discarded messages (Discard, Results.Discard): done without a
// dead letter, counted in Stats.Dropped (by batches) and Hooks.Dropped (by messages).
const ReasonDiscarded = core.ReasonDiscarded

// NewResults returns the Results of the batch msgs, every message done until marked. Mark
// messages by their index in msgs; ResultIndex finds a message's index by its id.
func NewResults[T any](msgs []T) *Results { return core.NewResults(len(msgs)) }

// ResultIndex returns the index, in the slice the listener received with ctx, of the message
// with id (MessageIDs), for a listener that regroups its messages and marks Results by id;
// false when no message of the batch has that id.
func ResultIndex(ctx context.Context, id string) (int, bool) {
	for i, x := range MessageIDs(ctx) {
		if x == id {
			return i, true
		}
	}
	return -1, false
}

// Snooze is the whole-batch snooze: a listener that returns it has every message of its batch
// run again after d (d < 0 is taken as 0) without spending a run of the budget; a message
// snoozed more than its queue's MaxSnoozes times is dead-lettered (ReasonSnoozeExhausted).
func Snooze(d time.Duration) error { return &core.SnoozeError{Delay: d} }

// Discard is the whole-batch discard: a listener that returns it has every message of its
// batch done without a dead letter or a retry, counted (ReasonDiscarded) and logged with
// reason.
func Discard(reason string) error { return &core.DiscardError{Reason: reason} }

var _ engine.SubsetOnError = (*typedBatch[int])(nil)

// OnErrorOf calls the queue's OnError, if any, with the messages at the indexes keep (a
// split batch's drop group).
func (b *typedBatch[T]) OnErrorOf(keep []int, err error, attempts int) error {
	if b.onErr == nil {
		return nil
	}
	msgs := make([]T, len(keep))
	for j, i := range keep {
		msgs[j] = b.env.Messages[i]
	}
	return b.onErr(msgs, err, attempts)
}
