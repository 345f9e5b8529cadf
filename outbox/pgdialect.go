package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
)

// pgDialect is the PostgreSQL Dialect, on a pgx pool: the statements the Store always ran.
type pgDialect struct {
	pool    *pgxpool.Pool
	schema  string
	outbox  string // quoted table names
	dead    string
	channel string // the NOTIFY channel of the schema's relays
}

var _ Dialect = (*pgDialect)(nil)

func newPGDialect(pool *pgxpool.Pool, schema string) *pgDialect {
	return &pgDialect{
		pool:    pool,
		schema:  schema,
		outbox:  pgx.Identifier{schema, "txmq_outbox"}.Sanitize(),
		dead:    pgx.Identifier{schema, "txmq_dead_letters"}.Sanitize(),
		channel: channel(schema),
	}
}

func (d *pgDialect) Name() string                  { return "postgres" }
func (d *pgDialect) Schema() string                { return d.schema }
func (d *pgDialect) Tables() (outbox, dead string) { return d.outbox, d.dead }

func (d *pgDialect) Insert(ctx context.Context, batches []core.OutgoingBatch, due bool) ([]int64, error) {
	rows, err := insertRows(ctx, d.pool, d.outbox, batches, due)
	if err != nil {
		return nil, err
	}
	return appendIDs(make([]int64, 0, len(rows)), rows), nil
}

// StageSQL inserts and notifies in one round trip: a data-modifying WITH always runs to
// completion.
func (d *pgDialect) StageSQL(batches []core.OutgoingBatch) (string, []any) {
	args := append(insertArgs(batches), d.channel)
	return `WITH ins AS (` + insertSQL(d.outbox, len(batches), true) + `) SELECT pg_notify($` +
		strconv.Itoa(len(args)) + `, '')`, args
}

func (d *pgDialect) ClaimPage(ctx context.Context, after int64, recoveryAge time.Duration, limit int, fn func(PageTx, []Row) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		rs, err := tx.Query(ctx, `SELECT id, queue, batch_id, body, `+remainingSQL+`, exclusive, attempts, coalesce(order_key, '') FROM `+d.outbox+`
			WHERE id > $1 AND (next_attempt_at <= now()
				OR (next_attempt_at IS NULL AND created_at <= now() - $2 * interval '1 microsecond'))
			ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`,
			after, recoveryAge.Microseconds(), limit)
		if err != nil {
			return err
		}
		var page []Row
		for rs.Next() {
			var r Row
			var left *int64
			if err := rs.Scan(&r.ID, &r.Batch.Queue, &r.Batch.ID, &r.Batch.Body, &left, &r.Batch.Exclusive, &r.Attempts, &r.Batch.Key); err != nil {
				rs.Close()
				return err
			}
			if left != nil && *left > 0 {
				r.Batch.Delay = time.Duration(*left) * time.Microsecond
			}
			page = append(page, r)
		}
		if err := rs.Err(); err != nil {
			return err
		}
		return fn(&pgPageTx{d: d, tx: tx}, page)
	})
}

func (d *pgDialect) InTx(ctx context.Context, fn func(PageTx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(&pgPageTx{d: d, tx: tx}) })
}

// pgPageTx is the PageTx of a pgx transaction.
type pgPageTx struct {
	d  *pgDialect
	tx pgx.Tx
}

func (p *pgPageTx) KeyIDs(ctx context.Context, upto map[OrderKey]int64) (map[OrderKey][]int64, error) {
	return pgKeyIDs(ctx, p.tx, p.d.outbox, upto)
}

// pgKeyIDs reads, in one statement (an index access per key), the ids of each key's rows up
// to its id in upto.
func pgKeyIDs(ctx context.Context, q querier, table string, upto map[OrderKey]int64) (map[OrderKey][]int64, error) {
	queues, keys, ids := make([]string, 0, len(upto)), make([]string, 0, len(upto)), make([]int64, 0, len(upto))
	for k, id := range upto {
		queues, keys, ids = append(queues, k.Queue), append(keys, k.Key), append(ids, id)
	}
	rs, err := q.Query(ctx, `SELECT o.queue, o.order_key, o.id FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(q, key, upto)
		JOIN `+table+` o ON o.queue = k.q AND o.order_key = k.key AND o.id <= k.upto ORDER BY o.id`, queues, keys, ids)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := make(map[OrderKey][]int64, len(upto))
	for rs.Next() {
		var k OrderKey
		var id int64
		if err := rs.Scan(&k.Queue, &k.Key, &id); err != nil {
			return nil, err
		}
		out[k] = append(out[k], id)
	}
	return out, rs.Err()
}

func (p *pgPageTx) Reschedule(ctx context.Context, id int64, lastError string, delay time.Duration) error {
	_, err := p.tx.Exec(ctx, `UPDATE `+p.d.outbox+` SET attempts = attempts + 1, last_error = $2,
			next_attempt_at = now() + $3 * interval '1 microsecond' WHERE id = $1`,
		id, lastError, delay.Microseconds())
	return err
}

func (p *pgPageTx) Delete(ctx context.Context, ids []int64) error {
	_, err := p.tx.Exec(ctx, `DELETE FROM `+p.d.outbox+` WHERE id = ANY($1)`, ids)
	return err
}

func (p *pgPageTx) MoveToDeadLetters(ctx context.Context, id int64, dl *core.DeadLetter) (refused, err error) {
	sp, err := p.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	_, merr := sp.Exec(ctx, deadLetterRowSQL(p.d.dead), dl.Queue, dl.BatchID, dl.Body, dl.Exclusive, dl.Reason,
		dl.Error, dl.Attempts, dl.Messages, dl.At, dl.Replays)
	if merr == nil {
		_, merr = sp.Exec(ctx, `DELETE FROM `+p.d.outbox+` WHERE id = $1`, id)
	}
	if merr == nil {
		merr = sp.Commit(ctx)
	}
	if merr != nil {
		if rerr := sp.Rollback(ctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			return nil, fmt.Errorf("%v, and so did rolling it back: %w", merr, rerr)
		}
		return merr, nil
	}
	return nil, nil
}

func (d *pgDialect) DeadLetter(ctx context.Context, dl *core.DeadLetter) (bool, error) {
	tag, err := d.pool.Exec(ctx, deadLetterRowSQL(d.dead),
		dl.Queue, dl.BatchID, dl.Body, dl.Exclusive, dl.Reason, dl.Error, dl.Attempts, dl.Messages, dl.At, dl.Replays)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

func scanDead(r pgx.CollectableRow) (DeadLetterRow, error) {
	var d DeadLetterRow
	var replayed *time.Time
	err := r.Scan(&d.ID, &d.Queue, &d.BatchID, &d.Body, &d.Exclusive, &d.Reason, &d.LastError, &d.Attempts,
		&d.Messages, &d.FirstFailedAt, &d.LastFailedAt, &d.ReplayCount, &replayed)
	if replayed != nil {
		d.ReplayedAt = *replayed
	}
	return d, err
}

func (d *pgDialect) ListDeadLetters(ctx context.Context, f DLQFilter) ([]DeadLetterRow, error) {
	where, args := f.where(dollar)
	args = append(args, f.Limit)
	rows, err := d.pool.Query(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE `+where+
		` ORDER BY id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanDead)
}

func (d *pgDialect) GetDeadLetter(ctx context.Context, id int64) (*DeadLetterRow, error) {
	rows, err := d.pool.Query(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	dl, err := pgx.CollectExactlyOneRow(rows, scanDead)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &dl, nil
}

func (d *pgDialect) ReplayDeadLetter(ctx context.Context, id int64, fn func(*DeadLetterRow) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return err
		}
		dl, err := pgx.CollectExactlyOneRow(rows, scanDead)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := fn(&dl); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+d.dead+` SET replay_count = replay_count + 1, replayed_at = now() WHERE id = $1`, id); err != nil {
			return fmt.Errorf("%w: %w", ErrMarkReplayed, err)
		}
		return nil
	})
}

func (d *pgDialect) PurgeDeadLetters(ctx context.Context, f DLQFilter) (int64, error) {
	where, args := f.where(dollar)
	q := `DELETE FROM ` + d.dead + ` WHERE ` + where
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q = `DELETE FROM ` + d.dead + ` WHERE id IN (SELECT id FROM ` + d.dead + ` WHERE ` + where +
			` ORDER BY id LIMIT $` + strconv.Itoa(len(args)) + `)`
	}
	tag, err := d.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (d *pgDialect) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	var held bool
	err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+d.outbox+` WHERE queue = $1 AND order_key = $2)`, queue, key).Scan(&held)
	return held, err
}

func (d *pgDialect) HeldKeys(ctx context.Context, queues []string) (map[string][]string, error) {
	rs, err := d.pool.Query(ctx, `SELECT DISTINCT queue, order_key FROM `+d.outbox+` WHERE queue = ANY($1) AND order_key IS NOT NULL`, queues)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	held := map[string][]string{}
	for rs.Next() {
		var q, k string
		if err := rs.Scan(&q, &k); err != nil {
			return nil, err
		}
		held[q] = append(held[q], k)
	}
	return held, rs.Err()
}

// dollar is PostgreSQL's placeholder for the n-th argument.
func dollar(n int) string { return "$" + strconv.Itoa(n) }
