package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/backendtest"
)

// world is one test's database: a file of its own in t.TempDir(), migrated.
type world struct {
	t    testing.TB
	path string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{t: t, path: filepath.Join(t.TempDir(), "jobs.db")}
	db := w.db(nil)
	// A minute rather than the default QueryTimeout (10 s): a machine loaded by other
	// processes (and -race, which instruments the SQLite engine too) has been seen to take
	// longer than 10 s to migrate a new file beside the suites' other work.
	if err := Migrate(context.Background(), db, &Options{QueryTimeout: time.Minute}); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return w
}

// db opens a new *sql.DB on the world's file (OpenDB), closed in cleanup.
func (w *world) db(opts *Options) *sql.DB {
	w.t.Helper()
	db, err := OpenDB(w.path, opts)
	if err != nil {
		w.t.Fatalf("OpenDB: %v", err)
	}
	w.t.Cleanup(func() { _ = db.Close() })
	return db
}

// backend returns a Backend on a new *sql.DB of the world's file (the reaper off unless opts
// say otherwise), closed in cleanup: as another process would open one.
func (w *world) backend(opts *Options) *Backend {
	w.t.Helper()
	return w.backendOn(w.db(opts), opts)
}

func (w *world) backendOn(db *sql.DB, opts *Options) *Backend {
	w.t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = -1
	}
	if o.Logger == nil {
		o.Logger = txmqtest.DiscardLogger()
	}
	be, err := New(context.Background(), db, &o)
	if err != nil {
		w.t.Fatalf("New: %v", err)
	}
	w.t.Cleanup(func() { _ = be.Close() })
	return be
}

// The helpers the SQL adapters' tests share (txmqtest/backendtest), under this package's
// tests' names.
var (
	publish  = backendtest.Publish
	publishN = backendtest.PublishN
	fetch    = backendtest.Fetch
	all      = backendtest.All
	depth    = backendtest.Depth
)
