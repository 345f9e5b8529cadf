package appdb_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqlite/appdb"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/outboxtest"
)

var quiet = slog.New(slog.DiscardHandler)

// openFile opens (OpenDB) and migrates a new SQLite file in the test's temp dir.
func openFile(t testing.TB) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	db := attach(t, path)
	if err := appdb.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// attach opens (OpenDB) the SQLite file at path, closed at the test's cleanup.
func attach(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := appdb.OpenDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// target is the suites' SQLite: a file of each test's own in its temp dir (OpenDB's
// defaults: WAL, synchronous=FULL, _txlock=immediate), several processes being several
// *sql.DB handles on it (each with its own connections and locks).
var target = &outboxtest.Target{
	Dialect: "sqlite",
	Label:   "sqlite",
	Open: func(t testing.TB) *outboxtest.Database {
		db, path := openFile(t)
		return database(db, path)
	},
	Attach: func(t testing.TB, path string) *outboxtest.Database {
		return database(attach(t, path), path)
	},
	BizDDL: "CREATE TABLE %s (id INTEGER PRIMARY KEY)",
	Now:    func(testing.TB, *sql.DB) time.Time { return time.Now() },
	// The crash test's publish budget (and so a claim's lease: 3 s + 20 s) is short, so that
	// the rows a killed process had claimed are taken over within the test, and so is the
	// backoff of a row whose publish ran out of that budget on a loaded machine (1 min by
	// default).
	Config: func(_ testing.TB, path string, jobs bool, cfg *txmq.Config) {
		cfg.DatabaseURL = "sqlite://" + path
		if jobs { // SQL jobs in the same file
			cfg.Backend = cfg.DatabaseURL
			cfg.Outbox.PublishTimeout = 3 * time.Second
			cfg.Outbox.BackoffBase, cfg.Outbox.BackoffMax = 100*time.Millisecond, time.Second
		}
	},
	CrashWait: 90 * time.Second,
}

// database is the suites' view of the file at path, db a handle on it.
func database(db *sql.DB, path string) *outboxtest.Database {
	return &outboxtest.Database{
		DB:         db,
		Name:       path,
		Table:      func(table string) string { return table },
		NewDialect: func(db *sql.DB) (outbox.Dialect, error) { return appdb.NewDialect(db) },
	}
}

type msg = outboxtest.Msg

// env is one test's file, store, node and queues.
type env struct {
	*outboxtest.Env
}

func setup(t *testing.T, mod func(*outbox.Options)) *env {
	t.Helper()
	return &env{outboxtest.Setup(t, target, mod)}
}
