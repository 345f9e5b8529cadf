package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/sqlite/appdb"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
)

// parityAppDB runs the parity suite with SQL jobs in a SQLite file and the outbox in
// another SQLite file (package appdb): every property that publishes through the outbox
// (transactions, routing modes, ordering through the outbox, poison rows, dead letters and
// replay, outages handed to the outbox) runs on SQLite end to end; the ones that need the app
// database on PostgreSQL are reported as not supported. It runs the groups holding such
// properties only (TestParity's jobs subtest runs every group on this backend already).
func parityAppDB(t *testing.T) {
	parity.RunWith(t, appDBHarness{}, &parity.Options{AppDB: &sqliteAppDB{}, Groups: []string{
		"transactions", "outages", "poison", "ordering", "identity", "middleware", "priority", "clock",
		"messages", "pause", "ratelimit", "schedule", "deadletters",
	}})
}

// appDBHarness is the sqlite harness under the name the summary line gives this suite
// ("parity[sqlite-appdb]"), apart from TestParity's "parity[sqlite]".
type appDBHarness struct{ parityHarness }

// Name implements parity.Harness.
func (appDBHarness) Name() string { return "sqlite-appdb" }

// sqliteAppDB is parity.AppDB on SQLite files: each store on a *sql.DB of its own (as a
// process would have), each property's tables in a file of its own.
type sqliteAppDB struct {
	mu    sync.Mutex
	dbs   map[*outbox.Store]*sql.DB
	paths map[*outbox.Store]string
}

func (*sqliteAppDB) Name() string { return "sqlite" }

func (a *sqliteAppDB) Store(t *testing.T, o outbox.Options, same *outbox.Store) *outbox.Store {
	t.Helper()
	a.mu.Lock()
	path := a.paths[same]
	a.mu.Unlock()
	if same == nil {
		path = filepath.Join(t.TempDir(), "app.db")
	}
	db, err := appdb.OpenDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if same == nil {
		if err := appdb.Migrate(context.Background(), db); err != nil {
			t.Fatalf("appdb.Migrate: %v", err)
		}
	}
	d, err := appdb.NewDialect(db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := outbox.NewWithDialect(d, &o)
	if err != nil {
		t.Fatalf("outbox.NewWithDialect: %v", err)
	}
	a.mu.Lock()
	if a.dbs == nil {
		a.dbs, a.paths = map[*outbox.Store]*sql.DB{}, map[*outbox.Store]string{}
	}
	a.dbs[s], a.paths[s] = db, path
	a.mu.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
		a.mu.Lock()
		delete(a.dbs, s)
		delete(a.paths, s)
		a.mu.Unlock()
	})
	return s
}

func (a *sqliteAppDB) OutboxRows(t *testing.T, s *outbox.Store) int {
	t.Helper()
	var n int
	if err := a.DB(t, s).QueryRow("SELECT COUNT(*) FROM txmq_outbox").Scan(&n); err != nil {
		t.Fatalf("counting outbox rows: %v", err)
	}
	return n
}

func (a *sqliteAppDB) DB(t *testing.T, s *outbox.Store) *sql.DB {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dbs[s]
}
