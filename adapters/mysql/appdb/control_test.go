package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/adapters/mysql/appdb"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/outboxtest"
	"github.com/txmq/txmq/txmqtest"
)

// TestControl runs the control tables' suite (outboxtest.RunControl) on MySQL/MariaDB, each
// process a *sql.DB of its own on the test's schema.
func TestControl(t *testing.T) {
	t.Parallel()
	outboxtest.RunControl(t, target)
}

// TestTickRolledBackClaimIsTakenOnce: the first claimer of a tick fails after its claim while
// two other processes wait for its row; once it rolls back, exactly one of them claims the
// tick (the other, whichever way InnoDB orders them, a deadlock victim included, finds it
// claimed), and its message is published once.
func TestTickRolledBackClaimIsTakenOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	a, b, c := e.Store, e.Peer(t), e.Peer(t)
	ctx := context.Background()
	tick := time.Unix(1_700_000_100, 0)
	errPublish := errors.New("the first claimer's publish failed")
	held, waiting := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Ticks().ClaimTick(ctx, "s", "orders", tick, time.Time{}, func(context.Context) error {
			close(held) // the claim's row is inserted, not committed
			<-waiting
			return errPublish
		})
		done <- err
	}()
	<-held
	var claimed atomic.Int32
	var wg sync.WaitGroup
	for i, s := range []*outbox.Store{b, c} {
		wg.Go(func() {
			ok, err := s.Ticks().ClaimTick(ctx, "s", "orders", tick, time.Time{}, func(ctx context.Context) error {
				return e.Orders.Publish(ctx, e.Node, msg{N: i})
			})
			if err != nil {
				t.Errorf("ClaimTick of a waiting process: %v", err)
			}
			if ok {
				claimed.Add(1)
			}
		})
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool { return lockWaits(t, e, 2) }, "two claims waiting for the first")
	close(waiting)
	if err := <-done; !errors.Is(err, errPublish) {
		t.Fatalf("the failed claim returned %v, want its publish's error", err)
	}
	wg.Wait()
	if n := claimed.Load(); n != 1 {
		t.Fatalf("the tick was claimed %d times after the first claimer rolled back, want once", n)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return len(e.Backend.Messages(t, "orders")) >= 1 }, "the tick's message published")
	for _, s := range []*outbox.Store{a, b, c} {
		_ = s.WaitIdle(ctx)
	}
	if got := e.Backend.Messages(t, "orders"); len(got) != 1 {
		t.Fatalf("published %v, want the tick's message once", got)
	}
}

// lockWaits reports whether at least n connections run an INSERT into e's ticks table: with a
// claim of the tick held open, they wait for its row lock. (The processlist, not
// INNODB_TRX: MariaDB lists only one of the waiters there.)
func lockWaits(t *testing.T, e *env, n int) bool {
	t.Helper()
	var waits int
	if err := e.DB.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE info LIKE ?`,
		"INSERT INTO `"+e.schema+"`.txmq_schedule_ticks%").Scan(&waits); err != nil {
		t.Fatal(err)
	}
	return waits >= n
}

// TestMigrateControlRerun: the control tables' migration runs again over existing tables (a
// process that died before recording it) without an error or a change to their rows.
func TestMigrateControlRerun(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	if err := e.Store.Pauses().Pause(ctx, "orders", "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Exec("DELETE FROM `"+e.schema+"`.txmq_migrations WHERE component = ? AND version = 2", appdb.Component); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := appdb.Migrate(ctx, e.DB, e.schema); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := e.Store.Pauses().PausedQueues(ctx); err != nil || ps["orders"].PausedBy != "kept" {
		t.Fatalf("PausedQueues after the migration ran again = %v, %v", ps, err)
	}
}

// TestLimitsSimultaneousAssignment: the bucket's statements read the row as it was whether
// the server assigns left to right (the default) or all at once (MariaDB's sql_mode
// SIMULTANEOUS_ASSIGNMENT, set here on the store's connections only).
func TestLimitsSimultaneousAssignment(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	cfg, err := appdb.Config(mysqlURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := e.DB.QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"sql_mode": "'" + mode + ",SIMULTANEOUS_ASSIGNMENT'"}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Ping(); err != nil {
		t.Skipf("this server has no SIMULTANEOUS_ASSIGNMENT mode (MySQL assigns left to right only): %v", err)
	}
	if err := db.QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode); err != nil || !strings.Contains(mode, "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("the session's sql_mode is %q (%v), want SIMULTANEOUS_ASSIGNMENT in it", mode, err)
	}
	d, err := appdb.NewDialect(db, e.schema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := outbox.NewWithDialect(d, &outbox.Options{Backend: e.Backend, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limit := core.RateLimit{Batches: 1, Per: time.Hour, Burst: 10}
	for i, want := range []struct{ take, got int }{{4, 4}, {4, 4}, {4, 2}, {1, 0}} {
		got, _, err := s.Limits().Take(ctx, "orders", want.take, limit)
		if err != nil || got != want.got {
			t.Fatalf("take %d of %d: got %d, %v; want %d", i, want.take, got, err, want.got)
		}
	}
	if err := s.Limits().Return(ctx, "orders", 3, limit); err != nil {
		t.Fatal(err)
	}
	if got, _, err := e.Store.Limits().Take(ctx, "orders", 5, limit); err != nil || got != 3 {
		t.Fatalf("Take after 3 given back = %d, %v; want 3", got, err)
	}
	var tokens float64
	if err := e.DB.QueryRow("SELECT tokens FROM `" + e.schema + "`.txmq_rate_buckets WHERE queue = 'orders'").Scan(&tokens); err != nil || tokens >= 1 {
		t.Fatalf("tokens left = %v, %v; want less than one", tokens, err)
	}
}
