package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/mysql" // the mysql:// jobs backend: durable across the killed processes
)

// crashEnv names the child's database; set only in the processes TestCrashWindow starts.
const crashEnv = "TXMQ_APPDB_CRASH_SCHEMA"

// crashApp opens the app of the crash test: SQL jobs and the outbox in one MySQL database.
func crashApp(ctx context.Context, u *url.URL, schema string, reg *txmq.Registry) (*txmq.App, error) {
	backend := *u
	q := backend.Query()
	q.Set("txmq_schema", schema)
	backend.RawQuery = q.Encode()
	return txmq.Open(ctx, &txmq.Config{Backend: backend.String(), DatabaseURL: u.String(), Schema: schema,
		Logger: quiet, Node: txmq.NodeOptions{Registry: reg}})
}

// TestCrashWindow kills publishers at random moments (SIGKILL, mid-transaction, mid-commit,
// mid-publish) and checks that the messages delivered are exactly those whose business row
// committed: none lost, none of a rolled-back or cut-off transaction. Duplicates are allowed
// (at-least-once).
func TestCrashWindow(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		crashChild(t)
		return
	}
	t.Parallel()
	u := mysqlURL(t)
	db := openDB(t, u)
	schema := privateSchema(t, db)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, u, schema, reg) // migrates both
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE `" + schema + "`.biz (id INT PRIMARY KEY) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	_ = app.Close(ctx)
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWindow$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+schema, "TXMQ_APPDB_CRASH_BASE="+strconv.Itoa(round*100000))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond) // the crash moment, at random
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	committed := map[int]bool{}
	rows, err := db.Query("SELECT id FROM `" + schema + "`.biz")
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
	// A survivor: its sweep publishes what the killed ones left, its node delivers.
	reg2 := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg2, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app2, err := crashApp(ctx, u, schema, reg2)
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
	waitFor(t, 30*time.Second, "every committed message delivered", func() bool {
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
	u := mysqlURL(t)
	schema := os.Getenv(crashEnv)
	base, _ := strconv.Atoi(os.Getenv("TXMQ_APPDB_CRASH_BASE"))
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, u, schema, reg)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("rolled back on purpose")
	for i := base; ; i++ {
		err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s`.biz VALUES (?)", schema), i); err != nil {
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
