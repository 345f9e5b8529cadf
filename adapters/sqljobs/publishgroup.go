package sqljobs

import (
	"context"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/groupcommit"
)

// maxGroupedBody is the largest body a grouped publish carries: a larger batch is stored by a
// statement of its own, so that one grouped statement stays within a few MB (SettleBatch of
// them at most) and a large body is never held back for company it does not need.
const maxGroupedBody = 64 << 10

// publishGroup runs concurrent plain publishes (no DedupWindow, Unique or ordering Key, whose
// statements give each batch its own verdict or lock) as one multi-row INSERT, the way group
// settles them (package core/groupcommit): a publish that finds no publish statement running
// goes at once, with the one-row statement of old; otherwise it waits, up to
// Options.SettleWindow and no longer than the statement it found running, for others to
// join (Options.SettleBatch at most). The group is eager: the engine's flush writes with a
// handful of writers, which a full window would keep waiting for writers that are busy.
type publishGroup = groupcommit.Group[*pubReq]

// pubReq is one batch's publish in a round.
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

// newPublishGroup returns the Backend's group of plain publishes.
func newPublishGroup(be *Backend) *publishGroup {
	return groupcommit.NewEager(be.o.SettleWindow, be.o.SettleBatch, be.execPublishes)
}

// publishPlain stores a plain batch through the publish group, or alone when its body is
// large, and classifies the outcome as Publish always did.
func (be *Backend) publishPlain(ctx context.Context, op string, b core.OutgoingBatch, body []byte, delayUs int64) error {
	if len(body) > maxGroupedBody {
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
// and tried again at once when the failure is retryable. When the database refuses the
// statement for a value it cannot store (core.ErrRejected), each batch is stored alone, so
// that only the offending batch is rejected.
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
	_, err := be.pool.Exec(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, prio(b), micros(b.Lead), b.FairKey)
	return err
}

// insertMany runs the multi-row publish statement for a round.
func (be *Backend) insertMany(ctx context.Context, reqs []*pubReq) error {
	n := len(reqs)
	var (
		queues, ids, fair = make([]string, n), make([]string, n), make([]string, n)
		bodies            = make([][]byte, n)
		delays, leads     = make([]int64, n), make([]int64, n)
		msgs              = make([]int32, n)
		prios             = make([]int16, n)
	)
	for i, r := range reqs {
		queues[i], ids[i], fair[i] = r.b.Queue, r.b.ID, r.b.FairKey
		bodies[i], delays[i], leads[i] = r.body, r.delayUs, micros(r.b.Lead)
		msgs[i], prios[i] = int32(r.b.Messages), prio(r.b)
	}
	_, err := be.pool.Exec(ctx, be.sql.publishMany, queues, ids, bodies, delays, msgs, prios, leads, fair, be.channel)
	return err
}

var _ core.PublishGrouper = (*Backend)(nil)

// PublishGroup implements core.PublishGrouper: a node's flush writes up to Options.SettleBatch
// plain batches of up to 64 KiB at a time, which the publish group stores together (1, the
// node's default, when grouping is off).
func (be *Backend) PublishGroup() (size, maxBody int) {
	if be.o.SettleWindow < 0 {
		return 1, maxGroupedBody
	}
	return be.o.SettleBatch, maxGroupedBody
}
