package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/sqlite" // the sqlite:// jobs backend, in the same file
)

// crashEnv names the child's database file; set only in the processes TestCrashWindow starts.
const crashEnv = "TXMQ_SQLITE_APPDB_CRASH_FILE"

// crashApp opens the app of the crash test: SQL jobs and the outbox in one SQLite file. The
// publish budget (and so a claim's lease: 3 s + 20 s) is short, so that the rows a killed
// process had claimed are taken over within the test, and so is the backoff of a row whose
// publish ran out of that budget on a loaded machine (1 min by default).
func crashApp(ctx context.Context, path string, reg *txmq.Registry) (*txmq.App, error) {
	cfg := &txmq.Config{Backend: "sqlite://" + path, DatabaseURL: "sqlite://" + path,
		Logger: quiet, Node: txmq.NodeOptions{Registry: reg}}
	cfg.Outbox.PublishTimeout = 3 * time.Second
	cfg.Outbox.BackoffBase, cfg.Outbox.BackoffMax = 100*time.Millisecond, time.Second
	return txmq.Open(ctx, cfg)
}

// TestCrashWindow kills publishers at random moments (SIGKILL, mid-transaction, mid-commit,
// mid-publish, mid-claim) and checks that the messages delivered are exactly those whose
// business row committed: none lost, none of a rolled-back or cut-off transaction.
// Duplicates are allowed (at-least-once).
func TestCrashWindow(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		crashChild(t)
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	ctx := context.Background()
	reg := txmq.NewRegistry()
	must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, path, reg) // migrates both
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE biz (id INTEGER PRIMARY KEY)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = app.Close(ctx)
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWindow$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, "TXMQ_APPDB_CRASH_BASE="+strconv.Itoa(round*100000))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond) // the crash moment, at random
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	committed := map[int]bool{}
	rows, err := db.Query("SELECT id FROM biz")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		committed[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(committed) == 0 {
		t.Fatal("no transaction committed before the kills; the test proves nothing")
	}
	// A survivor: its relay and sweep publish what the killed ones left (their claims once the
	// lease ends), its node delivers.
	reg2 := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg2, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app2, err := crashApp(ctx, path, reg2)
	if err != nil {
		t.Fatal(err)
	}
	defer app2.Close(context.Background())
	var mu sync.Mutex
	delivered := map[int]bool{}
	if err := q.Listen(app2.Node, func(_ context.Context, msgs []msg) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			delivered[m.N] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app2.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "every committed message delivered", func() bool {
		if _, err := app2.Store.SweepOnce(ctx); err != nil {
			t.Log(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for id := range committed {
			if !delivered[id] {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for id := range delivered {
		if !committed[id] {
			t.Errorf("message %d delivered but its transaction never committed", id)
		}
	}
	t.Logf("%d transactions committed before the kills, all delivered", len(committed))
}

// crashChild publishes in transactions as fast as it can until it is killed: each commits a
// business row and a message with its id, and one in five fails after publishing (rolled back).
func crashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	base, _ := strconv.Atoi(os.Getenv("TXMQ_APPDB_CRASH_BASE"))
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, path, reg)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("rolled back on purpose")
	for i := base; ; i++ {
		err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO biz VALUES (?)", i); err != nil {
				return err
			}
			if err := q.Publish(ctx, app.Node, msg{i}); err != nil {
				return err
			}
			if i%5 == 0 {
				return boom
			}
			return nil
		})
		if err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
}
