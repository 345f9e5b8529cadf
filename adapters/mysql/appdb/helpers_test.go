package appdb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/mysql/appdb"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/outboxtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

const defaultMySQLURL = "mysql://root@127.0.0.1:3306/test"

var quiet = slog.New(slog.DiscardHandler)

// mysqlURL is the test server (TXMQ_MYSQL_URL or the local MariaDB); a missing server skips,
// or fails under CI=true / TXMQ_REQUIRE_SERVICES=1.
func mysqlURL(t testing.TB) *url.URL {
	t.Helper()
	raw := defaultMySQLURL
	if v := strings.TrimSpace(os.Getenv("TXMQ_MYSQL_URL")); v != "" {
		raw = v
	}
	testenv.Check(t, "MySQL/MariaDB", "TXMQ_MYSQL_URL", raw, func(ctx context.Context, raw string) error {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		db := openDB(t, u)
		return db.PingContext(ctx)
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func openDB(t testing.TB, u *url.URL) *sql.DB {
	t.Helper()
	cfg, err := appdb.Config(u)
	if err != nil {
		t.Fatal(err)
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

// privateSchema creates a database of the test's own, dropped at cleanup.
func privateSchema(t testing.TB, db *sql.DB) string {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "txmqt_" + hex.EncodeToString(b)
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS " + name) })
	return name
}

// target is the suites' MariaDB/MySQL: a database (schema) of each test's own on the test
// server.
var target = &outboxtest.Target{
	Dialect: "mysql",
	Label:   "mariadb",
	Open: func(t testing.TB) *outboxtest.Database {
		db := openDB(t, mysqlURL(t))
		schema := privateSchema(t, db)
		if err := appdb.Migrate(context.Background(), db, schema); err != nil {
			t.Fatal(err)
		}
		return database(db, schema)
	},
	Attach: func(t testing.TB, schema string) *outboxtest.Database {
		return database(openDB(t, mysqlURL(t)), schema)
	},
	BizDDL: "CREATE TABLE %s (id INT PRIMARY KEY) ENGINE = InnoDB",
	Now: func(t testing.TB, db *sql.DB) time.Time {
		var now int64
		if err := db.QueryRow(`SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return time.UnixMicro(now)
	},
	Config: func(t testing.TB, schema string, jobs bool, cfg *txmq.Config) {
		u := mysqlURL(t)
		cfg.DatabaseURL, cfg.Schema = u.String(), schema
		if jobs { // SQL jobs in the same schema
			backend := *u
			q := backend.Query()
			q.Set("txmq_schema", schema)
			backend.RawQuery = q.Encode()
			cfg.Backend = backend.String()
		}
	},
	CrashWait: 30 * time.Second,
}

// database is the suites' view of schema on db.
func database(db *sql.DB, schema string) *outboxtest.Database {
	return &outboxtest.Database{
		DB:   db,
		Name: schema,
		Table: func(table string) string {
			return "`" + schema + "`." + table
		},
		NewDialect: func(db *sql.DB) (outbox.Dialect, error) { return appdb.NewDialect(db, schema) },
	}
}

type msg = outboxtest.Msg

// env is one test's schema, store, node and queues.
type env struct {
	*outboxtest.Env
	schema string
}

func setup(t *testing.T, mod func(*outbox.Options)) *env {
	t.Helper()
	e := outboxtest.Setup(t, target, mod)
	return &env{Env: e, schema: e.Name}
}

// migrateFor migrates the outbox tables into schema.
func migrateFor(ctx context.Context, db *sql.DB, schema string) error {
	return appdb.Migrate(ctx, db, schema)
}
