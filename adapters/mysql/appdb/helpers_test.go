package appdb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/mysql/appdb"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
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

type msg struct {
	N int `json:"n"`
}

// fakeBackend records publishes; fail, when set, is returned instead.
type fakeBackend struct {
	mu      sync.Mutex
	batches []core.OutgoingBatch
	fail    error
}

func (b *fakeBackend) setFail(err error) { b.mu.Lock(); b.fail = err; b.mu.Unlock() }

func (b *fakeBackend) Publish(_ context.Context, ob core.OutgoingBatch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	b.batches = append(b.batches, ob)
	return nil
}

func (b *fakeBackend) messages(t testing.TB, queue string) []int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, ob := range b.batches {
		if ob.Queue != queue {
			continue
		}
		env, err := envelope.Decode(ob.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range env.Messages {
			var v msg
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.N)
		}
	}
	return out
}

func (b *fakeBackend) Fetch(context.Context, core.FetchRequest) ([]*core.Claim, error) {
	return nil, nil
}
func (b *fakeBackend) Ack(context.Context, *core.Claim) error { return nil }
func (b *fakeBackend) Retry(context.Context, *core.Claim, []byte, time.Duration) error {
	return nil
}
func (b *fakeBackend) Drop(context.Context, *core.Claim, string) error          { return nil }
func (b *fakeBackend) Extend(context.Context, *core.Claim, time.Duration) error { return nil }
func (b *fakeBackend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, nil
}
func (b *fakeBackend) Close() error { return nil }

var errPlain = errors.New("backend said no")

// env is one test's database, store, node and queues.
type env struct {
	db     *sql.DB
	schema string
	be     *fakeBackend
	store  *outbox.Store
	node   *txmq.Node
	orders *txmq.Queue[msg] // Try
	strict *txmq.Queue[msg] // Require
	notes  *txmq.Queue[msg] // Never
	biz    string
}

func setup(t *testing.T, mod func(*outbox.Options)) *env {
	t.Helper()
	ctx := context.Background()
	u := mysqlURL(t)
	db := openDB(t, u)
	e := &env{db: db, schema: privateSchema(t, db), be: &fakeBackend{}}
	if err := appdb.Migrate(ctx, db, e.schema); err != nil {
		t.Fatal(err)
	}
	d, err := appdb.NewDialect(db, e.schema)
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox.Options{Backend: e.be, Logger: quiet}
	if mod != nil {
		mod(o)
	}
	if e.store, err = outbox.NewWithDialect(d, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	reg := txmq.NewRegistry()
	e.orders = must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Try}))
	e.strict = must(txmq.DeclareIn(reg, "strict", txmq.QueueConfig[msg]{Transactional: txmq.Require, MaxBatchMessages: 2}))
	e.notes = must(txmq.DeclareIn(reg, "notes", txmq.QueueConfig[msg]{Transactional: txmq.Never}))
	e.node = must(txmq.NewNode(e.be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: e.store, DeadLetters: e.store}))
	t.Cleanup(func() { _ = e.node.Close(context.Background()) })
	e.biz = "`" + e.schema + "`.biz"
	if _, err := db.Exec("CREATE TABLE " + e.biz + " (id INT PRIMARY KEY) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	return e
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (e *env) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM `%s`.%s", e.schema, table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// migrateFor migrates the outbox tables into schema.
func migrateFor(ctx context.Context, db *sql.DB, schema string) error {
	return appdb.Migrate(ctx, db, schema)
}
