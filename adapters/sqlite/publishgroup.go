package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

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

// sqlPublishRow is one row of a grouped publish ({{i}} its index in the round).
const sqlPublishRow = `(:queue{{i}}, :batch{{i}}, :body{{i}}, :now + :delay{{i}}, :messages{{i}}, :now, :prio{{i}}, :lead{{i}}, :fair{{i}})`

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
// turn.
func (be *Backend) insertMany(ctx context.Context, ps []*groupcommit.Publish) error {
	rows := make([]string, len(ps))
	args := make([]any, 0, 8*len(ps)+1)
	for i, p := range ps {
		rows[i] = strings.ReplaceAll(sqlPublishRow, "{{i}}", fmt.Sprint(i))
		b := p.Batch
		args = append(args, sql.Named(fmt.Sprint("queue", i), b.Queue), sql.Named(fmt.Sprint("batch", i), b.ID),
			sql.Named(fmt.Sprint("body", i), p.Body), sql.Named(fmt.Sprint("delay", i), p.DelayUs),
			sql.Named(fmt.Sprint("messages", i), b.Messages), sql.Named(fmt.Sprint("prio", i), prio(b)),
			sql.Named(fmt.Sprint("lead", i), micros(b.Lead)), sql.Named(fmt.Sprint("fair", i), b.FairKey))
	}
	stmt := sqlPublishMany + strings.Join(rows, ", ")
	_, err := be.exec(ctx, stmt, append(args, nowArg())...)
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
