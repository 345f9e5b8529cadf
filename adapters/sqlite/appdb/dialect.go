package appdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Table names, in the main database of the file.
const (
	outboxTable = "txmq_outbox"
	deadTable   = "txmq_dead_letters"
)

// Dialect is the outbox.Dialect of a SQLite database file on a *sql.DB opened with
// modernc.org/sqlite (OpenDB). It also implements outbox.SQLDB, so the Store's RunInSQLTx
// begins its transactions on the same *sql.DB, and outbox.InspectDialect.
//
// SQLite has one writer at a time per file and no row locks: every write of the dialect is a
// short BEGIN IMMEDIATE transaction (it takes the write lock when it begins, so it never fails
// half-way for a lock). A page of the relay or sweep is claimed with one UPDATE ... RETURNING
// that leases its rows (a claim token, and a next-attempt time at the lease's end), published
// with no lock held, and settled in a second transaction (published rows deleted, failed ones
// rescheduled, the others given back). So the app's writers never wait for a publish, and a
// backend in the same file (the sqlite jobs adapter) can write while the outbox publishes to
// it.
type Dialect struct {
	db *sql.DB
}

var (
	_ outbox.Dialect             = (*Dialect)(nil)
	_ outbox.SQLDB               = (*Dialect)(nil)
	_ outbox.SingleWriterDialect = (*Dialect)(nil)
)

// NewDialect returns the dialect on db, a *sql.DB opened with modernc.org/sqlite on a file
// (OpenDB sets what it needs: WAL, busy_timeout, synchronous=FULL, _txlock=immediate). Run
// Migrate first.
func NewDialect(db *sql.DB) (*Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlite appdb: NewDialect needs a *sql.DB opened with modernc.org/sqlite (appdb.OpenDB)", core.ErrInvalidConfig)
	}
	return &Dialect{db: db}, nil
}

// Name implements outbox.Dialect.
func (d *Dialect) Name() string { return "sqlite" }

// Schema implements outbox.Dialect: "main", SQLite's name for the database of the file (it
// has no schemas; a namespace is a file).
func (d *Dialect) Schema() string { return "main" }

// Tables implements outbox.Dialect.
func (d *Dialect) Tables() (string, string) { return outboxTable, deadTable }

// InsertTaken implements outbox.SingleWriterDialect: it takes the file's write lock (BEGIN
// IMMEDIATE) before it calls take, so that no transaction stages rows between the moment the
// batches are taken and the moment they are written.
func (d *Dialect) InsertTaken(ctx context.Context, take func() []core.OutgoingBatch) ([]core.OutgoingBatch, error) {
	var taken []core.OutgoingBatch
	var took bool
	err := d.write(ctx, "inserting handed-off outbox rows", func(c *sql.Conn) error {
		if !took {
			taken, took = take(), true
		}
		at := now()
		for rest := taken; len(rest) > 0; {
			chunk := rest[:min(len(rest), 500)]
			rest = rest[len(chunk):]
			if _, err := c.ExecContext(ctx, insertStmt(len(chunk)), insertArgs(chunk, at, true)...); err != nil {
				return err
			}
		}
		return nil
	})
	return taken, err
}

// DB implements outbox.SQLDB.
func (d *Dialect) DB() *sql.DB { return d.db }

// now is the machine's clock in microseconds since the Unix epoch: every process on a SQLite
// file runs on the machine that holds it, so they share this clock (SQLite's own has
// millisecond precision only).
func now() int64 { return time.Now().UnixMicro() }

// insertStmt is a multi-row INSERT of n rows.
func insertStmt(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + outboxTable + " (queue, batch_id, body, not_before, exclusive, order_key, created_at, next_attempt_at) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// insertArgs flattens batches into insertStmt's arguments at the time at (microseconds): a
// not-before time for a delay (rounded up to the microsecond; NULL for none), and due rows
// with a next-attempt time of at.
func insertArgs(batches []core.OutgoingBatch, at int64, due bool) []any {
	args := make([]any, 0, len(batches)*8)
	now := time.UnixMicro(at)
	var next any
	if due {
		next = at
	}
	for _, b := range batches {
		var notBefore any
		if dl := b.DelayFrom(now); dl > 0 {
			notBefore = at + int64((dl+time.Microsecond-1)/time.Microsecond)
		}
		var key any
		if b.Key != "" {
			key = b.Key
		}
		args = append(args, b.Queue, b.ID, b.Body, notBefore, b.Exclusive, key, at, next)
	}
	return args
}

// Insert implements outbox.Dialect: one INSERT per row (its rowid is its id), in one
// transaction.
func (d *Dialect) Insert(ctx context.Context, batches []core.OutgoingBatch, due bool) ([]int64, error) {
	var ids []int64
	err := d.write(ctx, "inserting outbox rows", func(c *sql.Conn) error {
		ids = make([]int64, 0, len(batches))
		at := now()
		q := insertStmt(1)
		for _, b := range batches {
			res, err := c.ExecContext(ctx, q, insertArgs([]core.OutgoingBatch{b}, at, due)...)
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

// StageSQL implements outbox.Dialect: a multi-row INSERT of due rows (no NOTIFY: RunInSQLTx
// wakes this process's relay at commit, the others poll).
func (d *Dialect) StageSQL(batches []core.OutgoingBatch) (string, []any) {
	return insertStmt(len(batches)), insertArgs(batches, now(), true)
}

// write runs fn in a BEGIN IMMEDIATE transaction on one connection, committed when fn
// returns nil, again after lock contention (withBusyRetry); its error is classified with op.
func (d *Dialect) write(ctx context.Context, op string, fn func(*sql.Conn) error) error {
	return classify(op, withBusyRetry(ctx, func() error { return d.writeOnce(ctx, fn) }))
}

func (d *Dialect) writeOnce(ctx context.Context, fn func(*sql.Conn) error) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := fn(c); err != nil {
		rollback(ctx, c)
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(ctx, c)
		return err
	}
	return nil
}

// rollback ends c's transaction, detached from ctx's cancellation; when that fails the
// connection is discarded rather than returned to the pool in an unknown state.
func rollback(ctx context.Context, c *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.ExecContext(rctx, "ROLLBACK"); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// InTx implements outbox.Dialect: one BEGIN IMMEDIATE transaction.
func (d *Dialect) InTx(ctx context.Context, fn func(outbox.PageTx) error) error {
	var fnErr error
	err := d.write(ctx, "an outbox transaction", func(c *sql.Conn) error {
		fnErr = fn(&connTx{c: c})
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// connTx is the outbox.PageTx of a transaction on one connection: every statement runs at
// once.
type connTx struct{ c *sql.Conn }

// KeyIDs implements outbox.PageTx.
func (p *connTx) KeyIDs(ctx context.Context, upto map[outbox.OrderKey]int64) (map[outbox.OrderKey][]int64, error) {
	return keyIDs(ctx, p.c, upto)
}

// Reschedule implements outbox.PageTx.
func (p *connTx) Reschedule(ctx context.Context, id int64, lastError string, delay time.Duration) error {
	return reschedule(ctx, p.c, id, lastError, delay, 0)
}

// Delete implements outbox.PageTx.
func (p *connTx) Delete(ctx context.Context, ids []int64) error { return deleteRows(ctx, p.c, ids) }

// MoveToDeadLetters implements outbox.PageTx, in a savepoint of the transaction.
func (p *connTx) MoveToDeadLetters(ctx context.Context, id int64, dl *core.DeadLetter) (refused, err error) {
	return moveToDeadLetters(ctx, p.c, id, dl)
}

// querier is what a statement runs on: the *sql.DB, or one connection in a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// keyIDs reads, in one statement (a UNION ALL of one index range per key), the ids of each
// key's rows up to its id in upto.
func keyIDs(ctx context.Context, q querier, upto map[outbox.OrderKey]int64) (map[outbox.OrderKey][]int64, error) {
	parts := make([]string, 0, len(upto))
	args := make([]any, 0, 3*len(upto))
	for k, id := range upto {
		parts = append(parts, `SELECT queue, order_key, id FROM `+outboxTable+` WHERE queue = ? AND order_key = ? AND id <= ?`)
		args = append(args, k.Queue, k.Key, id)
	}
	rs, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL ")+" ORDER BY id", args...)
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

// reschedule records a failed publish of row id; with a token, only while the row is still
// claimed by it (a row whose lease ran out and that another claim took is left to that one).
func reschedule(ctx context.Context, q querier, id int64, lastError string, delay time.Duration, token int64) error {
	stmt := `UPDATE ` + outboxTable + ` SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,
		claim_token = NULL, claim_next = NULL WHERE id = ?`
	args := []any{lastError, now() + delay.Microseconds(), id}
	if token != 0 {
		stmt += ` AND claim_token = ?`
		args = append(args, token)
	}
	_, err := q.ExecContext(ctx, stmt, args...)
	return err
}

// deleteRows deletes the rows ids in one statement.
func deleteRows(ctx context.Context, q querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.ExecContext(ctx, `DELETE FROM `+outboxTable+` WHERE id IN (`+marks(len(ids))+`)`, int64Args(ids)...)
	return err
}

// moveToDeadLetters inserts dl and deletes row id, both or neither, in a savepoint of the
// transaction c is in.
func moveToDeadLetters(ctx context.Context, c *sql.Conn, id int64, dl *core.DeadLetter) (refused, err error) {
	if _, err := c.ExecContext(ctx, "SAVEPOINT txmq_dead_letter"); err != nil {
		return nil, err
	}
	_, merr := c.ExecContext(ctx, deadLetterStmt, deadLetterArgs(dl)...)
	if merr == nil {
		_, merr = c.ExecContext(ctx, `DELETE FROM `+outboxTable+` WHERE id = ?`, id)
	}
	if merr == nil {
		_, merr = c.ExecContext(ctx, "RELEASE SAVEPOINT txmq_dead_letter")
	}
	if merr != nil {
		if _, rerr := c.ExecContext(ctx, "ROLLBACK TO SAVEPOINT txmq_dead_letter"); rerr != nil {
			return nil, fmt.Errorf("%v, and so did rolling it back: %w", merr, rerr)
		}
		_, _ = c.ExecContext(ctx, "RELEASE SAVEPOINT txmq_dead_letter")
		return merr, nil
	}
	return nil, nil
}

// newToken returns a random positive claim token.
func newToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}

// HoldsKey implements outbox.Dialect.
func (d *Dialect) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	var held bool
	err := d.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+outboxTable+` WHERE queue = ? AND order_key = ?)`, queue, key).Scan(&held)
	return held, classify("reading the outbox's ordering keys", err)
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
	rs, err := d.db.QueryContext(ctx, `SELECT DISTINCT queue, order_key FROM `+outboxTable+` WHERE queue IN (`+marks(len(queues))+`) AND order_key IS NOT NULL`, args...)
	if err != nil {
		return nil, classify("reading the outbox's ordering keys", err)
	}
	defer rs.Close()
	for rs.Next() {
		var q, k string
		if err := rs.Scan(&q, &k); err != nil {
			return nil, err
		}
		held[q] = append(held[q], k)
	}
	return held, classify("reading the outbox's ordering keys", rs.Err())
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
