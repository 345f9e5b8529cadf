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

// Concurrent plain publishes (no DedupWindow, Unique or ordering Key, whose statements give
// each batch its own verdict or lock) share one multi-row INSERT (groupcommit.Publishes): a
// publish that finds no publish statement running goes at once, with the one-row statement;
// otherwise it waits, up to Options.SettleWindow and no longer than the statement it found
// running, for others to join (Options.SettleBatch at most). A round the server refuses for
// one batch's value stores each batch alone, so only that batch is rejected.

// newPublishes returns the Backend's publish group.
func (be *Backend) newPublishes() *groupcommit.Publishes {
	return groupcommit.NewPublishes(be.o.SettleWindow, be.o.SettleBatch, groupcommit.PublishStore{
		One:      be.insertOne,
		Many:     be.insertMany,
		Attempt:  be.attempt,
		Rejected: rejected,
	})
}

// groupedBody returns the largest body a grouped publish carries: maxGroupedBody, less on a
// server whose max_allowed_packet could not carry a full round of such bodies.
func (be *Backend) groupedBody() int {
	return min(maxGroupedBody, be.maxBatch/(2*max(be.o.SettleBatch, 1)))
}

// publishPlain stores a plain batch through the publish group, or alone when its body is
// large, and classifies the outcome as Publish always did.
func (be *Backend) publishPlain(ctx context.Context, op string, b core.OutgoingBatch, body []byte, delayUs int64) error {
	p := &groupcommit.Publish{Batch: b, Body: body, DelayUs: delayUs}
	if len(body) > be.groupedBody() {
		return be.run(ctx, op, func(ctx context.Context) error { return be.insertOne(ctx, p) })
	}
	return be.call.Explain(op, be.publishes.Do(ctx, b, body, delayUs))
}

// insertOne runs the one-row publish statement.
func (be *Backend) insertOne(ctx context.Context, p *groupcommit.Publish) error {
	b := p.Batch
	_, err := be.db.ExecContext(ctx, be.sql.publish, b.Queue, b.ID, p.Body, p.DelayUs, b.Messages, prio(b), micros(b.Lead), b.FairKey)
	return err
}

// insertMany runs the publish statement with one row per batch of the round, in order.
func (be *Backend) insertMany(ctx context.Context, ps []*groupcommit.Publish) error {
	stmt := be.sql.publish + strings.Repeat(", "+be.sql.publishRow, len(ps)-1)
	args := make([]any, 0, 8*len(ps))
	for _, p := range ps {
		b := p.Batch
		args = append(args, b.Queue, b.ID, p.Body, p.DelayUs, b.Messages, prio(b), micros(b.Lead), b.FairKey)
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
