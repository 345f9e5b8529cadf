package mysql

import (
	"context"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/groupcommit"
)

// maxGroupedBody is the largest body a grouped publish carries: a larger batch is stored by a
// statement of its own, so that one grouped statement stays within a few MB (SettleBatch of
// them at most) and well within max_allowed_packet (see groupedBody).
const maxGroupedBody = 64 << 10

// pubReq is one batch's publish in a round of the publish group: concurrent plain publishes
// (no DedupWindow, Unique or ordering Key, whose statements give each batch its own verdict or
// lock) stored by one multi-row INSERT, the way Acks and Drops share a transaction (package
// core/groupcommit). A publish that finds no publish statement running goes at once, with the
// one-row statement of old; otherwise it waits, up to Options.SettleWindow and no longer than
// the statement it found running (the group is eager: the engine's flush writes with a
// bounded number of writers), for others to join (Options.SettleBatch at most).
type pubReq struct {
	b       core.OutgoingBatch
	body    []byte // b.Body, never nil
	delayUs int64
	// ctx is the caller's: when it ends (a deadline, or a Close of the node shortening it)
	// the round's statement is cancelled, as the caller's lone statement was, so that no
	// batch is stored behind the back of a caller told that its publish failed.
	ctx context.Context
	// err is this batch's own outcome when a grouped statement was refused for one batch's
	// value and each batch of the round was stored alone.
	err error
}

// groupedBody returns the largest body a grouped publish carries: maxGroupedBody, less on a
// server whose max_allowed_packet could not carry a full round of such bodies.
func (be *Backend) groupedBody() int {
	return min(maxGroupedBody, be.maxBatch/(2*max(be.o.SettleBatch, 1)))
}

// publishPlain stores a plain batch through the publish group, or alone when its body is
// large, and classifies the outcome as Publish always did.
func (be *Backend) publishPlain(ctx context.Context, op string, b core.OutgoingBatch, body []byte, delayUs int64) error {
	if len(body) > be.groupedBody() {
		return be.run(ctx, op, func(ctx context.Context) error { return be.insertOne(ctx, b, body, delayUs) })
	}
	req := &pubReq{b: b, body: body, delayUs: delayUs, ctx: ctx}
	err := be.publishes.Do(ctx, req)
	if err == nil {
		err = req.err
	}
	return be.call.Explain(op, err)
}

// execPublishes stores a round of plain publishes: one alone with the one-row statement, more
// with one multi-row statement, cancelled when any member's context ends, bounded by QueryTimeout
// and tried again while the failure is retryable. When the server refuses the statement for
// a value it cannot store (core.ErrRejected), each batch is stored alone, so that only the
// offending batch is rejected.
func (be *Backend) execPublishes(ctx context.Context, reqs []*pubReq) error {
	return groupcommit.RunCancellable(ctx, reqs, be.execRound)
}

// CallerContext implements groupcommit.Caller.
func (r *pubReq) CallerContext() context.Context { return r.ctx }

// SetErr implements groupcommit.Caller.
func (r *pubReq) SetErr(err error) { r.err = err }

// execRound runs the statements of execPublishes.
func (be *Backend) execRound(ctx context.Context, reqs []*pubReq) error {
	if len(reqs) == 1 {
		r := reqs[0]
		return be.attempt(ctx, func(ctx context.Context) error { return be.insertOne(ctx, r.b, r.body, r.delayUs) })
	}
	err := be.attempt(ctx, func(ctx context.Context) error { return be.insertMany(ctx, reqs) })
	if err == nil || !rejected(err) {
		return err
	}
	for _, r := range reqs {
		r.err = be.attempt(ctx, func(ctx context.Context) error { return be.insertOne(ctx, r.b, r.body, r.delayUs) })
	}
	return nil
}

// insertOne runs the one-row publish statement.
func (be *Backend) insertOne(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	_, err := be.db.ExecContext(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, prio(b), micros(b.Lead), b.FairKey)
	return err
}

// insertMany runs the publish statement with one row per batch of the round, in order.
func (be *Backend) insertMany(ctx context.Context, reqs []*pubReq) error {
	stmt := be.sql.publish + strings.Repeat(", "+be.sql.publishRow, len(reqs)-1)
	args := make([]any, 0, 8*len(reqs))
	for _, r := range reqs {
		args = append(args, r.b.Queue, r.b.ID, r.body, r.delayUs, r.b.Messages, prio(r.b), micros(r.b.Lead), r.b.FairKey)
	}
	_, err := be.db.ExecContext(ctx, stmt, args...)
	return err
}

var _ core.PublishGrouper = (*Backend)(nil)

// PublishGroup implements core.PublishGrouper: a node's flush writes up to Options.SettleBatch
// plain batches at a time (of at most groupedBody bytes), which the publish group stores
// together (1, the node's default, when grouping is off).
func (be *Backend) PublishGroup() (size, maxBody int) {
	if be.o.SettleWindow < 0 {
		return 1, be.groupedBody()
	}
	return be.o.SettleBatch, be.groupedBody()
}
