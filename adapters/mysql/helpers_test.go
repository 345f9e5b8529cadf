package mysql

import (
	"context"
	"database/sql"
	"io"
	"log"
	"net/url"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/backendtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// The driver logs a connection's failures itself; the outage properties cut connections on
// purpose, and the errors reach the tests anyway.
func init() { _ = gomysql.SetLogger(log.New(io.Discard, "", 0)) }

// defaultMySQLURL is the local MariaDB (root, no password, database "test").
const defaultMySQLURL = "mysql://root@127.0.0.1:3306/test"

// mysqlURL returns the test server's URL (TXMQ_MYSQL_URL or the default) after checking once
// per process that it answers; otherwise it skips the test, or fails it under CI=true or
// TXMQ_REQUIRE_SERVICES=1.
func mysqlURL(t testing.TB) *url.URL {
	t.Helper()
	raw := defaultMySQLURL
	if v := envURL(); v != "" {
		raw = v
	}
	testenv.Check(t, "MySQL/MariaDB", "TXMQ_MYSQL_URL", raw, pingMySQL)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("TXMQ_MYSQL_URL: %v", err)
	}
	return u
}

func pingMySQL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	_, _, cfg, err := parseConfig(u)
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	return db.PingContext(ctx)
}

// dbAt opens a *sql.DB on the URL's server (addr overrides its host:port when set), closed in
// cleanup.
func dbAt(t testing.TB, u *url.URL, addr string) *sql.DB {
	t.Helper()
	_, _, cfg, err := parseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Timeout = 2 * time.Second
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// world is one test's namespace: a database of its own, migrated, dropped in cleanup.
type world struct {
	t      testing.TB
	u      *url.URL
	admin  *sql.DB
	schema string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	u := mysqlURL(t)
	admin := dbAt(t, u, "")
	schema := testenv.UniqueName("txmq_t_")
	if err := Migrate(context.Background(), admin, &Options{Schema: schema}); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(schema)); err != nil {
			t.Logf("dropping database %s: %v", schema, err)
		}
	})
	return &world{t: t, u: u, admin: admin, schema: schema}
}

// backend returns a Backend on a new *sql.DB of the world's database (the reaper off unless
// opts say otherwise), closed in cleanup.
func (w *world) backend(opts *Options) *Backend {
	w.t.Helper()
	return w.backendOn(dbAt(w.t, w.u, ""), opts)
}

func (w *world) backendOn(db *sql.DB, opts *Options) *Backend {
	w.t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = w.schema
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
