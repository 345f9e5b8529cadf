package groupcommit

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// Publish is one batch's publish in a round of a Publishes group.
type Publish struct {
	// Batch is the batch to store.
	Batch core.OutgoingBatch
	// Body is Batch.Body, never nil.
	Body []byte
	// DelayUs is how long after the statement's now the batch becomes due, in microseconds
	// (rounded up: never early).
	DelayUs int64
	// ctx is the caller's: when it ends (a deadline, or a Close of the node shortening it)
	// the round's statement is cancelled, as the caller's lone statement was, so that no
	// batch is stored behind the back of a caller told that its publish failed.
	ctx context.Context
	// err is this batch's own outcome when a grouped statement was refused for one batch's
	// value and each batch of the round was stored alone.
	err error
}

// CallerContext implements Caller.
func (p *Publish) CallerContext() context.Context { return p.ctx }

// SetErr implements Caller.
func (p *Publish) SetErr(err error) { p.err = err }

// PublishStore is what a Publishes group runs its rounds with: an adapter's statements and
// call policy.
type PublishStore struct {
	// One stores one batch with the adapter's one-row statement.
	One func(ctx context.Context, p *Publish) error
	// Many stores a round's batches, in order, with one statement (or one transaction).
	Many func(ctx context.Context, ps []*Publish) error
	// Attempt runs fn bounded by the adapter's query timeout, once more at once when the
	// first failure is retryable, and returns its error unclassified.
	Attempt func(ctx context.Context, fn func(ctx context.Context) error) error
	// Rejected reports an error meaning the database refused a value for good: the round's
	// batches are then stored one by one, so that only the offending batch is rejected.
	Rejected func(error) bool
}

// Publishes groups a SQL adapter's concurrent plain publishes (no DedupWindow, Unique or
// ordering key, whose statements give each batch its own verdict or lock) into one
// statement, the way Acks and Drops share a transaction: a publish that finds no round
// running goes at once, with the one-row statement; otherwise it waits, up to the window and
// no longer than the round it found running (the group is eager: a node's flush writes with a
// bounded number of writers), for others to join, batch at most.
type Publishes struct {
	g *Group[*Publish]
	s PublishStore
}

// NewPublishes returns a Publishes group with the window and batch of New (a negative window
// or a batch of 1: every publish alone) running its rounds with s.
func NewPublishes(window time.Duration, batch int, s PublishStore) *Publishes {
	ps := &Publishes{s: s}
	ps.g = NewEager(window, batch, ps.Run)
	return ps
}

// Run stores ps as one round now, without gathering (as a round of the group would, the
// callers' contexts each cutting it short), and records each batch's own outcome (Err).
func (ps *Publishes) Run(ctx context.Context, reqs []*Publish) error {
	return RunCancellable(ctx, reqs, ps.round)
}

// Err is the batch's own outcome after its round, when the round stored each batch alone;
// nil otherwise (the round's error is every batch's).
func (p *Publish) Err() error { return p.err }

// Do stores b (its body, never nil, and delay in µs) in a round and returns its own outcome,
// unclassified.
func (ps *Publishes) Do(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	p := &Publish{Batch: b, Body: body, DelayUs: delayUs, ctx: ctx}
	err := ps.g.Do(ctx, p)
	if err == nil {
		err = p.err
	}
	return err
}

// round stores a round: one alone with the one-row statement, more with one statement,
// tried again while the failure is retryable; when the database refuses the statement for a
// value it cannot store, each batch alone.
func (ps *Publishes) round(ctx context.Context, reqs []*Publish) error {
	if len(reqs) == 1 {
		return ps.s.Attempt(ctx, func(ctx context.Context) error { return ps.s.One(ctx, reqs[0]) })
	}
	err := ps.s.Attempt(ctx, func(ctx context.Context) error { return ps.s.Many(ctx, reqs) })
	if err == nil || !ps.s.Rejected(err) {
		return err
	}
	for _, p := range reqs {
		p.err = ps.s.Attempt(ctx, func(ctx context.Context) error { return ps.s.One(ctx, p) })
	}
	return nil
}
