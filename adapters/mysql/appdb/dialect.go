package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlcall"
	"github.com/txmq/txmq/outbox"
)

// sqlNow is the database's clock in microseconds since the Unix epoch (UTC, constant within a
// statement).
const sqlNow = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// readCommitted is the isolation of the store's own transactions: a claim locks the rows it
// returns and no gap, so the app's transactions keep inserting outbox rows while a page is
// published.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Dialect is the outbox.Dialect of MySQL 8 and MariaDB 10.6+ on a *sql.DB opened with
// github.com/go-sql-driver/mysql. It also implements outbox.SQLDB, so the Store's RunInSQLTx
// begins its transactions on the same *sql.DB, outbox.InspectDialect (inspect.go) and
// outbox.ControlDialect: the Store's Pauses, Ticks, Limits and Nodes on this database
// (control.go).
type Dialect struct {
	db     *sql.DB
	schema string // "" for the connection's database
	outbox string // qualified table names
	dead   string
	q      string          // the qualifier of the other tables ("`db`." or "")
	call   *sqlcall.Runner // the control tables' calls (control.go)
}

var (
	_ outbox.Dialect = (*Dialect)(nil)
	_ outbox.SQLDB   = (*Dialect)(nil)
)

// NewDialect returns the dialect on db for the tables in schema (a database name; "" for the
// connection's own database). Run Migrate first.
func NewDialect(db *sql.DB, schema string) (*Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: mysql appdb: NewDialect needs a *sql.DB opened with the mysql driver", core.ErrInvalidConfig)
	}
	if err := checkSchema(schema); err != nil {
		return nil, err
	}
	q := qualifier(schema)
	return &Dialect{db: db, schema: schema, outbox: q + "txmq_outbox", dead: q + "txmq_dead_letters", q: q, call: newControlRunner()}, nil
}

// Name implements outbox.Dialect.
func (d *Dialect) Name() string { return "mysql" }

// Schema implements outbox.Dialect: the database holding the tables ("" when the
// connection's own).
func (d *Dialect) Schema() string { return d.schema }

// Tables implements outbox.Dialect.
func (d *Dialect) Tables() (string, string) { return d.outbox, d.dead }

// DB implements outbox.SQLDB.
func (d *Dialect) DB() *sql.DB { return d.db }

// insertStmt is a multi-row INSERT of n rows; due sets next_attempt_at to now.
func (d *Dialect) insertStmt(n int, due bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + d.outbox + " (queue, batch_id, body, not_before, exclusive, order_key, created_at, next_attempt_at) VALUES ")
	next := "NULL"
	if due {
		next = sqlNow
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, " + sqlNow + " + ?, ?, ?, " + sqlNow + ", " + next + ")")
	}
	return b.String()
}

// insertArgs flattens batches into insertStmt's arguments: a delay in microseconds, rounded
// up (NULL for none).
func insertArgs(batches []core.OutgoingBatch) []any {
	args := make([]any, 0, len(batches)*6)
	now := time.Now()
	for _, b := range batches {
		var delay any
		if dl := b.DelayFrom(now); dl > 0 {
			delay = int64((dl + time.Microsecond - 1) / time.Microsecond)
		}
		var key any
		if b.Key != "" {
			key = b.Key
		}
		args = append(args, b.Queue, b.ID, b.Body, delay, b.Exclusive, key)
	}
	return args
}

// Insert implements outbox.Dialect: one INSERT per row (LAST_INSERT_ID gives its id on MySQL
// and MariaDB alike), in one transaction.
func (d *Dialect) Insert(ctx context.Context, batches []core.OutgoingBatch, due bool) ([]int64, error) {
	ids := make([]int64, 0, len(batches))
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		q := d.insertStmt(1, due)
		for _, b := range batches {
			res, err := tx.ExecContext(ctx, q, insertArgs([]core.OutgoingBatch{b})...)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}

// StageSQL implements outbox.Dialect: a multi-row INSERT of due rows (no NOTIFY: the relays
// poll, and RunInSQLTx wakes this process's at commit).
func (d *Dialect) StageSQL(batches []core.OutgoingBatch) (string, []any) {
	return d.insertStmt(len(batches), true), insertArgs(batches)
}

// inTx runs fn in a READ COMMITTED transaction, committed when fn returns nil.
func (d *Dialect) inTx(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	tx, err := d.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	ok = true
	return tx.Commit()
}

// ClaimPage implements outbox.Dialect.
func (d *Dialect) ClaimPage(ctx context.Context, after int64, recoveryAge time.Duration, limit int, fn func(outbox.PageTx, []outbox.Row) error) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		rs, err := tx.QueryContext(ctx, `SELECT id, queue, batch_id, body, CASE WHEN not_before > `+sqlNow+` THEN not_before - `+sqlNow+` END,
				exclusive, attempts, COALESCE(order_key, '') FROM `+d.outbox+`
			WHERE id > ? AND (next_attempt_at <= `+sqlNow+`
				OR (next_attempt_at IS NULL AND created_at <= `+sqlNow+` - ?))
			ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
			after, recoveryAge.Microseconds(), limit)
		if err != nil {
			return err
		}
		var page []outbox.Row
		for rs.Next() {
			var r outbox.Row
			var left sql.NullInt64
			if err := rs.Scan(&r.ID, &r.Batch.Queue, &r.Batch.ID, &r.Batch.Body, &left, &r.Batch.Exclusive, &r.Attempts, &r.Batch.Key); err != nil {
				rs.Close()
				return err
			}
			if left.Valid && left.Int64 > 0 {
				r.Batch.Delay = time.Duration(left.Int64) * time.Microsecond
			}
			page = append(page, r)
		}
		if err := rs.Close(); err != nil {
			return err
		}
		if err := rs.Err(); err != nil {
			return err
		}
		return fn(&pageTx{d: d, tx: tx}, page)
	})
}

// InTx implements outbox.Dialect.
func (d *Dialect) InTx(ctx context.Context, fn func(outbox.PageTx) error) error {
	return d.inTx(ctx, func(tx *sql.Tx) error { return fn(&pageTx{d: d, tx: tx}) })
}

// pageTx is the outbox.PageTx of a *sql.Tx.
type pageTx struct {
	d  *Dialect
	tx *sql.Tx
}

// KeyIDs implements outbox.PageTx: one SELECT, a UNION ALL of one index range per key.
func (p *pageTx) KeyIDs(ctx context.Context, upto map[outbox.OrderKey]int64) (map[outbox.OrderKey][]int64, error) {
	parts := make([]string, 0, len(upto))
	args := make([]any, 0, 3*len(upto))
	for k, id := range upto {
		parts = append(parts, `(SELECT queue, order_key, id FROM `+p.d.outbox+` WHERE queue = ? AND order_key = ? AND id <= ?)`)
		args = append(args, k.Queue, k.Key, id)
	}
	rs, err := p.tx.QueryContext(ctx, strings.Join(parts, " UNION ALL ")+" ORDER BY id", args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := make(map[outbox.OrderKey][]int64, len(upto))
	for rs.Next() {
		var k outbox.OrderKey
		var id int64
		if err := rs.Scan(&k.Queue, &k.Key, &id); err != nil {
			return nil, err
		}
		out[k] = append(out[k], id)
	}
	return out, rs.Err()
}

// Reschedule implements outbox.PageTx.
func (p *pageTx) Reschedule(ctx context.Context, id int64, lastError string, delay time.Duration) error {
	_, err := p.tx.ExecContext(ctx, `UPDATE `+p.d.outbox+` SET attempts = attempts + 1, last_error = ?,
		next_attempt_at = `+sqlNow+` + ? WHERE id = ?`, lastError, delay.Microseconds(), id)
	return err
}

// Delete implements outbox.PageTx.
func (p *pageTx) Delete(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := p.tx.ExecContext(ctx, `DELETE FROM `+p.d.outbox+` WHERE id IN (`+marks(len(ids))+`)`, int64Args(ids)...)
	return err
}

// MoveToDeadLetters implements outbox.PageTx, in a savepoint of the page's transaction.
func (p *pageTx) MoveToDeadLetters(ctx context.Context, id int64, dl *core.DeadLetter) (refused, err error) {
	if _, err := p.tx.ExecContext(ctx, "SAVEPOINT txmq_dead_letter"); err != nil {
		return nil, err
	}
	_, merr := p.tx.ExecContext(ctx, p.d.deadLetterStmt(), p.d.deadLetterArgs(dl)...)
	if merr == nil {
		_, merr = p.tx.ExecContext(ctx, `DELETE FROM `+p.d.outbox+` WHERE id = ?`, id)
	}
	if merr == nil {
		_, merr = p.tx.ExecContext(ctx, "RELEASE SAVEPOINT txmq_dead_letter")
	}
	if merr != nil {
		if _, rerr := p.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT txmq_dead_letter"); rerr != nil {
			return nil, fmt.Errorf("%v, and so did rolling it back: %w", merr, rerr)
		}
		return merr, nil
	}
	return nil, nil
}

// deadLetterStmt inserts a dead letter; a batch already there keeps its row while it is
// still dead (no column changes: 0 rows affected), and one replayed since is updated and dead
// again, unless the batch's replay generation is below the row's replay count (the original,
// or an earlier replay, coming back: see core.DeadLetter.Replays). A new row's replay count
// starts at the generation (a batch replayed before its row was purged), and an update
// raises it to the generation. The assignments, in order, read replayed_at and replay_count
// before they change: replay_count, raised to at least the generation, keeps the test true
// or false for the last one, which clears replayed_at. Each reads the generation from a
// placeholder of its own (deadLetterArgs repeats it).
func (d *Dialect) deadLetterStmt() string {
	const stays = `(replayed_at IS NULL OR replay_count > ?)`
	keep := func(col string) string {
		return col + ` = IF(` + stays + `, ` + col + `, VALUES(` + col + `))`
	}
	return `INSERT INTO ` + d.dead + ` (queue, batch_id, body, exclusive, reason, last_error, attempts, messages,
			first_failed_at, last_failed_at, replay_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE ` + strings.Join([]string{keep("body"), keep("exclusive"), keep("reason"),
		keep("last_error"), keep("attempts"), keep("messages"),
		`last_failed_at = IF(` + stays + `, last_failed_at, GREATEST(last_failed_at, VALUES(last_failed_at)))`,
		`replay_count = IF(` + stays + `, replay_count, GREATEST(replay_count, VALUES(replay_count)))`,
		`replayed_at = IF(` + stays + `, replayed_at, NULL)`}, ", ")
}

// deadLetterGens is how many times deadLetterStmt reads the replay generation after its
// VALUES (which hold it once, as the new row's replay count).
const deadLetterGens = 9

func (d *Dialect) deadLetterArgs(dl *core.DeadLetter) []any {
	at := dl.At.UnixMicro()
	args := []any{dl.Queue, dl.BatchID, dl.Body, dl.Exclusive, dl.Reason, dl.Error, dl.Attempts, dl.Messages, at, at, dl.Replays}
	for range deadLetterGens {
		args = append(args, dl.Replays)
	}
	return args
}

// DeadLetter implements outbox.Dialect. The driver reports changed rows (not found ones):
// 1 for an insert, 2 for an update, 0 for a row left as it was.
func (d *Dialect) DeadLetter(ctx context.Context, dl *core.DeadLetter) (bool, error) {
	res, err := d.db.ExecContext(ctx, d.deadLetterStmt(), d.deadLetterArgs(dl)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

const deadCols = `id, queue, batch_id, body, exclusive, reason, last_error, attempts, messages,
	first_failed_at, last_failed_at, replay_count, replayed_at`

type scanner interface{ Scan(dest ...any) error }

func scanDead(r scanner) (outbox.DeadLetterRow, error) {
	var dl outbox.DeadLetterRow
	var first, last int64
	var replayed sql.NullInt64
	err := r.Scan(&dl.ID, &dl.Queue, &dl.BatchID, &dl.Body, &dl.Exclusive, &dl.Reason, &dl.LastError, &dl.Attempts,
		&dl.Messages, &first, &last, &dl.ReplayCount, &replayed)
	dl.FirstFailedAt, dl.LastFailedAt = time.UnixMicro(first), time.UnixMicro(last)
	if replayed.Valid {
		dl.ReplayedAt = time.UnixMicro(replayed.Int64)
	}
	return dl, err
}

func question(int) string { return "?" }

// ListDeadLetters implements outbox.Dialect.
func (d *Dialect) ListDeadLetters(ctx context.Context, f outbox.DLQFilter) ([]outbox.DeadLetterRow, error) {
	where, args := f.SQL(question)
	rs, err := d.db.QueryContext(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE `+where+` ORDER BY id LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []outbox.DeadLetterRow
	for rs.Next() {
		dl, err := scanDead(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, dl)
	}
	return out, rs.Err()
}

// GetDeadLetter implements outbox.Dialect.
func (d *Dialect) GetDeadLetter(ctx context.Context, id int64) (*outbox.DeadLetterRow, error) {
	dl, err := scanDead(d.db.QueryRowContext(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, outbox.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &dl, nil
}

// ReplayDeadLetter implements outbox.Dialect.
func (d *Dialect) ReplayDeadLetter(ctx context.Context, id int64, fn func(*outbox.DeadLetterRow) error) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		dl, err := scanDead(tx.QueryRowContext(ctx, `SELECT `+deadCols+` FROM `+d.dead+` WHERE id = ? FOR UPDATE`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return outbox.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := fn(&dl); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+d.dead+` SET replay_count = replay_count + 1, replayed_at = `+sqlNow+` WHERE id = ?`, id); err != nil {
			return fmt.Errorf("%w: %w", outbox.ErrMarkReplayed, err)
		}
		return nil
	})
}

// PurgeDeadLetters implements outbox.Dialect.
func (d *Dialect) PurgeDeadLetters(ctx context.Context, f outbox.DLQFilter) (int64, error) {
	where, args := f.SQL(question)
	q := `DELETE FROM ` + d.dead + ` WHERE ` + where
	if f.Limit > 0 {
		q += ` ORDER BY id LIMIT ?`
		args = append(args, f.Limit)
	}
	res, err := d.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// HoldsKey implements outbox.Dialect.
func (d *Dialect) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	var held bool
	err := d.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+d.outbox+` WHERE queue = ? AND order_key = ?)`, queue, key).Scan(&held)
	return held, err
}

// HeldKeys implements outbox.Dialect.
func (d *Dialect) HeldKeys(ctx context.Context, queues []string) (map[string][]string, error) {
	held := map[string][]string{}
	if len(queues) == 0 {
		return held, nil
	}
	args := make([]any, len(queues))
	for i, q := range queues {
		args[i] = q
	}
	rs, err := d.db.QueryContext(ctx, `SELECT DISTINCT queue, order_key FROM `+d.outbox+` WHERE queue IN (`+marks(len(queues))+`) AND order_key IS NOT NULL`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var q, k string
		if err := rs.Scan(&q, &k); err != nil {
			return nil, err
		}
		held[q] = append(held[q], k)
	}
	return held, rs.Err()
}

// marks returns n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
