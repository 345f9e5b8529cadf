package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/groupcommit"
)

// maxGroupedBody is the largest body a grouped publish carries: a larger batch is stored by a
// statement of its own, so that one grouped statement stays within a few MB (SettleBatch of
// them at most).
const maxGroupedBody = 64 << 10

// Concurrent plain publishes (no DedupWindow, Unique or ordering Key, whose statements give
// each batch its own verdict) share one multi-row INSERT, so one commit, one fsync and one
// turn of the file's write lock (groupcommit.Publishes): a publish that finds no publish
// statement running goes at once, with the one-row statement; otherwise it waits, up to
// Options.SettleWindow and no longer than the statement it found running, for others to join
// (Options.SettleBatch at most). A round SQLite refuses for one batch's value stores each
// batch alone, so only that batch is rejected.

// sqlPublishRow is one row of a grouped publish, its values positional in the columns
// order of sqlPublishMany (run_at and created_at given by insertMany).
const sqlPublishRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`

// newPublishes returns the Backend's publish group.
func (be *Backend) newPublishes() *groupcommit.Publishes {
	return groupcommit.NewPublishes(be.o.SettleWindow, be.o.SettleBatch, groupcommit.PublishStore{
		One: func(ctx context.Context, p *groupcommit.Publish) error {
			_, err := be.exec(ctx, sqlPublish, publishArgs(p.Batch, p.Body, p.DelayUs)...)
			return err
		},
		Many:     be.insertMany,
		Attempt:  be.attempt,
		Rejected: rejected,
	})
}

// publishPlain stores a plain batch through the publish group, or alone when its body is
// large, and classifies the outcome as Publish always did.
func (be *Backend) publishPlain(ctx context.Context, op string, b core.OutgoingBatch, body []byte, delayUs int64) error {
	if len(body) > maxGroupedBody {
		return be.run(ctx, op, func(ctx context.Context) error {
			_, err := be.exec(ctx, sqlPublish, publishArgs(b, body, delayUs)...)
			return err
		})
	}
	return be.call.Explain(op, be.publishes.Do(ctx, b, body, delayUs))
}

// insertMany stores a round's batches with one INSERT of a row each, in order, in one write
// turn; every row is stored at the same now (run_at now plus its delay), as the one-row
// statement stores its own.
func (be *Backend) insertMany(ctx context.Context, ps []*groupcommit.Publish) error {
	now := time.Now().UnixMicro()
	args := make([]any, 0, 9*len(ps))
	for _, p := range ps {
		b := p.Batch
		args = append(args, b.Queue, b.ID, p.Body, now+p.DelayUs, b.Messages, now, prio(b), micros(b.Lead), b.FairKey)
	}
	stmt := sqlPublishMany + sqlPublishRow + strings.Repeat(", "+sqlPublishRow, len(ps)-1)
	_, err := be.exec(ctx, stmt, args...)
	return err
}

// sqlPublishMany is the head of a grouped publish; the rows (sqlPublishRow) follow.
const sqlPublishMany = `INSERT INTO txmq_jobs (queue, batch_id, body, run_at, messages, created_at, priority, lead_us, fair_key) VALUES `

var _ core.PublishGrouper = (*Backend)(nil)

// PublishGroup implements core.PublishGrouper: a node's flush writes up to Options.SettleBatch
// plain batches at a time (of at most 64 KiB each), which the publish group stores together (1,
// the node's default, when grouping is off).
func (be *Backend) PublishGroup() (size, maxBody int) {
	if be.o.SettleWindow < 0 {
		return 1, maxGroupedBody
	}
	return be.o.SettleBatch, maxGroupedBody
}
