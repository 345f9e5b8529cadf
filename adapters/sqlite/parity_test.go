package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
)

// TestParity runs the shared conformance suite on SQLite: each property gets a database file
// of its own; every client (node) gets its own *sql.DB on that file, so nodes are as separate
// as processes (a publish wakes only its own Backend's fetches, the others poll, and they meet
// at the file's write lock). There is no server to cut: Break makes every statement of the
// Env's clients fail as when another process holds the file locked past busy_timeout (the
// genuine SQLITE_BUSY error of the driver, see faultConnector), reads included, and makes the
// pool drop its connections. The transaction properties run the outbox on PostgreSQL in front
// of this backend (parity.Options.PostgresURL's default), as for every non-PostgreSQL
// backend; the appdb subtest (parity_appdb_test.go) runs them with the outbox on SQLite.
//
// Its subtests run one after the other: jobs, the suite described here, and appdb, the
// outbox in the app database too (parityAppDB).
func TestParity(t *testing.T) {
	t.Run("jobs", func(t *testing.T) { parity.Run(t, parityHarness{}) })
	t.Run("appdb", func(t *testing.T) { parityAppDB(t) })
}

type parityHarness struct{}

func (parityHarness) Name() string { return "sqlite" }

// Capabilities: SQLite runs inside the test process (under -race its engine is instrumented
// too, 3 to 4 times slower) and one file has one writer at a time, so properties run 4 at
// a time and leases are 2 s, as for the NATS cluster.
func (parityHarness) Capabilities() parity.Caps {
	return parity.Caps{Lease: 2 * time.Second, PollWait: 200 * time.Millisecond, Parallel: 4}
}

func (parityHarness) Open(t *testing.T) parity.Env {
	return &parityEnv{w: newWorld(t), broken: &atomic.Bool{}}
}

type parityEnv struct {
	w      *world
	broken *atomic.Bool
}

func (e *parityEnv) Backend(t *testing.T) core.Backend {
	opts := &Options{} // the defaults: QueryTimeout 10 s, BusyTimeout 5 s
	// synchronous=NORMAL rather than Open's FULL: in WAL mode a commit then survives a crash
	// of the process (what the suite's restarts and outages mean) but not a power cut, which
	// no property makes; it spares each commit an fsync of the WAL (the fairness group's
	// 10,000-batch backlogs took a fifth longer under -race with one).
	db := sql.OpenDB(&faultConnector{dsn: dsn(e.w.path, opts, url.Values{"_pragma": {"synchronous(NORMAL)"}}), broken: e.broken})
	t.Cleanup(func() { _ = db.Close() })
	be, err := New(context.Background(), db, &Options{
		QueryTimeout: opts.QueryTimeout,
		ReapInterval: -1,
		Logger:       txmqtest.DiscardLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func (e *parityEnv) Break(*testing.T)   { e.broken.Store(true) }
func (e *parityEnv) Restore(*testing.T) { e.broken.Store(false) }

// faultConnector opens modernc.org/sqlite connections on dsn; while broken is set, opening a
// connection and every statement on an open one fail with a genuine SQLITE_BUSY error of the
// driver, and the pool's connections are dropped when next reused.
type faultConnector struct {
	dsn    string
	broken *atomic.Bool
}

func (c *faultConnector) Connect(context.Context) (driver.Conn, error) {
	if c.broken.Load() {
		return nil, outageErr()
	}
	conn, err := sqliteDriver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: conn, broken: c.broken}, nil
}

func (c *faultConnector) Driver() driver.Driver { return sqliteDriver() }

// faultConn is one connection of a faultConnector.
type faultConn struct {
	driver.Conn
	broken *atomic.Bool
}

func (c *faultConn) fail() error {
	if c.broken.Load() {
		return outageErr()
	}
	return nil
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.fail(); err != nil {
		return nil, err
	}
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *faultConn) CheckNamedValue(v *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if c.broken.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

var (
	outageOnce sync.Once
	outage     error
	driverOnce sync.Once
	drv        driver.Driver
)

// sqliteDriver returns modernc.org/sqlite's registered driver.
func sqliteDriver() driver.Driver {
	driverOnce.Do(func() {
		db, _ := sql.Open("sqlite", ":memory:")
		drv = db.Driver()
		_ = db.Close()
	})
	return drv
}

// outageErr returns the driver's own SQLITE_BUSY error, made once by a real lock conflict
// on a scratch file (a write transaction held while another connection with no busy timeout
// tries to begin one).
func outageErr() error {
	outageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "txmq-sqlite-outage")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "outage.db")
		a, _ := sql.Open("sqlite", path)
		b, _ := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		ca, err := a.Conn(ctx)
		if err == nil {
			defer ca.Close()
			_, err = ca.ExecContext(ctx, "BEGIN IMMEDIATE")
		}
		if err == nil {
			_, err = b.ExecContext(ctx, "BEGIN IMMEDIATE")
		}
		outage = fmt.Errorf("parity outage (the file held locked by another process): %w", err)
	})
	return outage
}
