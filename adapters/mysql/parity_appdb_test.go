package mysql

import (
	"context"
	"database/sql"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/mysql/appdb"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// parityAppDB runs the parity suite with SQL jobs on MySQL/MariaDB and the outbox in the
// same server (package appdb): every property that publishes through the outbox
// (transactions, routing modes, ordering through the outbox, poison rows, dead letters and
// replay, outages handed to the outbox), and the pause, rate-limit and schedule properties on
// the store's control tables, runs on MySQL end to end; the ones that need the app database on
// PostgreSQL (the ledger, pgx savepoints) are reported as not supported. It runs the groups holding such
// properties only (TestParity's jobs subtest runs every group on this backend already).
func parityAppDB(t *testing.T) {
	parity.RunWith(t, appDBHarness{}, &parity.Options{AppDB: &mysqlAppDB{}, Groups: []string{
		"transactions", "outages", "poison", "ordering", "identity", "middleware", "priority", "clock",
		"messages", "pause", "ratelimit", "schedule", "unique", "deadletters",
	}})
}

// appDBHarness is the mysql harness under the name the summary line gives this suite
// ("parity[mysql-appdb]"), apart from TestParity's "parity[mysql]".
type appDBHarness struct{ parityHarness }

// Name implements parity.Harness.
func (appDBHarness) Name() string { return "mysql-appdb" }

// mysqlAppDB is parity.AppDB on the test server: each store on a *sql.DB of its own (as a
// process would have), each property's tables in a database of its own.
type mysqlAppDB struct {
	mu  sync.Mutex
	dbs map[*outbox.Store]*sql.DB
}

func (*mysqlAppDB) Name() string { return "mysql" }

func (a *mysqlAppDB) Store(t *testing.T, o outbox.Options, same *outbox.Store) *outbox.Store {
	t.Helper()
	u := mysqlURL(t)
	db := dbAt(t, u, "")
	db.SetMaxOpenConns(8) // a process's pool, not the server's whole connection limit
	ctx := context.Background()
	var schema string
	if same != nil {
		schema = same.Schema()
	} else {
		schema = testenv.UniqueName("txmq_o_")
		if err := appdb.Migrate(ctx, db, schema); err != nil {
			t.Fatalf("appdb.Migrate: %v", err)
		}
		t.Cleanup(func() { dropDatabase(t, u, schema) })
	}
	d, err := appdb.NewDialect(db, schema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := outbox.NewWithDialect(d, &o)
	if err != nil {
		t.Fatalf("outbox.NewWithDialect: %v", err)
	}
	a.mu.Lock()
	if a.dbs == nil {
		a.dbs = map[*outbox.Store]*sql.DB{}
	}
	a.dbs[s] = db
	a.mu.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
		a.mu.Lock()
		delete(a.dbs, s)
		a.mu.Unlock()
	})
	return s
}

func (a *mysqlAppDB) OutboxRows(t *testing.T, s *outbox.Store) int {
	t.Helper()
	a.mu.Lock()
	db := a.dbs[s]
	a.mu.Unlock()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + quoteIdent(s.Schema()) + ".txmq_outbox").Scan(&n); err != nil {
		t.Fatalf("counting outbox rows: %v", err)
	}
	return n
}

func (a *mysqlAppDB) DB(t *testing.T, s *outbox.Store) *sql.DB {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dbs[s]
}

// dropDatabase drops a test's database (cleanup).
func dropDatabase(t *testing.T, u *url.URL, schema string) {
	db := dbAt(t, u, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(schema)); err != nil {
		t.Logf("dropping database %s: %v", schema, err)
	}
}
