package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqlite/appdb"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestOpen: TXMQ_DATABASE_URL=sqlite://... works through txmq.Open once this package is
// linked: the tables are migrated into the file, RunInSQLTx publishes after commit, the
// listener gets the message; the ledger, pgx transactions and other schemas are refused with
// errors naming the feature and SQLite.
func TestOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := outboxtest.Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	cfg := &txmq.Config{Backend: "memory://", DatabaseURL: "sqlite:" + path, Logger: quiet,
		Node: txmq.NodeOptions{Registry: reg}}
	app, err := txmq.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if app.Pool != nil || app.Store.Dialect() != "sqlite" || app.Store.Schema() != "main" {
		t.Fatalf("Pool = %v, Dialect = %q, Schema = %q", app.Pool, app.Store.Dialect(), app.Store.Schema())
	}
	got := make(chan int, 10)
	if err := q.Listen(app.Node, func(_ context.Context, msgs []msg) error {
		for _, m := range msgs {
			got <- m.N
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, app.Node, msg{N: 1}); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("a Require publish outside a transaction = %v", err)
	}
	if err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY)"); err != nil {
			return err
		}
		return q.Publish(ctx, app.Node, msg{N: 7})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("got %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message never arrived")
	}

	refused := func(what string, c txmq.Config, want ...string) {
		t.Helper()
		app2, err := txmq.Open(ctx, &c)
		if err == nil {
			_ = app2.Close(ctx)
			t.Fatalf("Open with %s succeeded", what)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open with %s = %v, want it to name %q", what, err, w)
			}
		}
	}
	withLedger := *cfg
	withLedger.Ledger = &ledger.Options{}
	refused("a ledger", withLedger, "ledger", "PostgreSQL", "sqlite")
	withSchema := *cfg
	withSchema.Schema = "other"
	refused("a schema", withSchema, "SQLite has no schemas", `"other"`)
	memory := *cfg
	memory.DatabaseURL = "sqlite://:memory:"
	refused("an in-memory database", memory, "in-memory")
	missing := *cfg
	missing.DatabaseURL, missing.SkipMigrate = "sqlite://"+filepath.Join(filepath.Dir(path), "missing.db"), true
	refused("a missing file and no migration", missing, "missing.db does not exist", "txmq migrate")
	param := *cfg
	param.DatabaseURL = "sqlite://" + path + "?txmq_poll_interval=1s"
	refused("a txmq_ parameter", param, "txmq_poll_interval")

	if err := app.Store.Savepoint(ctx, nil); !errors.Is(err, outbox.ErrNeedsPostgres) || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("Savepoint = %v", err)
	}
	if err := app.Store.RunInTx(ctx, nil); !errors.Is(err, outbox.ErrNeedsPostgres) || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("RunInTx = %v", err)
	}
	if app.Store.Pauses() == nil || app.Store.Ticks() == nil || app.Store.Limits() == nil || app.Store.Nodes() == nil {
		t.Fatal("a SQLite store lacks pauses, ticks, limits or heartbeats")
	}
}

// TestParseURL: the URL forms name the file; driver parameters pass, others are refused.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw, path, err string
	}{
		{raw: "sqlite://app.db", path: "app.db"},
		{raw: "sqlite3://data/app.db", path: "data/app.db"},
		{raw: "sqlite:///var/lib/app.db", path: "/var/lib/app.db"},
		{raw: "sqlite:app.db?_pragma=synchronous(NORMAL)", path: "app.db"},
		{raw: "sqlite://", err: "names no file"},
		{raw: "sqlite://u:secret@app.db", err: "user or password"},
		{raw: "sqlite://app.db?bogus=1", err: `"bogus"`},
		{raw: "sqlite://app.db?txmq_migrate=false", err: "TXMQ_MIGRATE"},
		{raw: "sqlite://file::memory:", err: "in-memory"},
	} {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		path, _, err := appdb.ParseURL(u)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, core.ErrInvalidConfig)):
			t.Errorf("ParseURL(%s) = %v, want an error naming %q", tt.raw, err, tt.err)
		case tt.err == "" && (err != nil || path != tt.path):
			t.Errorf("ParseURL(%s) = %q, %v; want %q", tt.raw, path, err, tt.path)
		case strings.Contains(tt.raw, "secret") && err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("ParseURL(%s) error shows the password: %v", tt.raw, err)
		}
	}
}

// TestMigrateRace: processes migrating one file at once (here, handles of their own) all
// succeed and apply the migration once.
func TestMigrateRace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "race.db")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		db, err := appdb.OpenDB(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Go(func() { errs <- appdb.Migrate(context.Background(), db) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db, _ := appdb.OpenDB(path, nil)
	defer db.Close()
	var n int
	want := len(outboxtest.Must(fs.Glob(appdb.Migrations(), "*.sql")))
	if err := db.QueryRow("SELECT COUNT(*) FROM txmq_migrations WHERE component = ?", appdb.Component).Scan(&n); err != nil || n != want {
		t.Fatalf("migrations recorded = %d, %v; want each of the %d files once", n, err, want)
	}
}

// TestReplayInProgress: a dead letter being replayed (its publish under way) is not replayed
// by a second call at the same time; the first one marks it replayed.
func TestReplayInProgress(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	b := outboxtest.Batch("orders", "", 1)
	if err := e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: b.ID, Body: b.Body, Reason: core.ReasonDeliveryExhausted, Error: "x", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dead, err := e.Store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders"})
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %v, %v", dead, err)
	}
	d, err := appdb.NewDialect(e.DB)
	if err != nil {
		t.Fatal(err)
	}
	inner := make(chan error, 1)
	err = d.ReplayDeadLetter(ctx, dead[0].ID, func(*outbox.DeadLetterRow) error {
		inner <- d.ReplayDeadLetter(ctx, dead[0].ID, func(*outbox.DeadLetterRow) error { return errors.New("published twice") })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-inner; !errors.Is(err, outbox.ErrAlreadyReplayed) || !strings.Contains(err.Error(), "being replayed") {
		t.Fatalf("the concurrent replay = %v, want ErrAlreadyReplayed", err)
	}
	got, err := e.Store.GetDeadLetter(ctx, dead[0].ID)
	if err != nil || got.Dead() || got.ReplayCount != 1 {
		t.Fatalf("after the replay: %+v, %v", got, err)
	}
}
