package outboxtest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
)

// crashEnv names the child's database (a Database.Name) and crashBizEnv its business
// table; set only in the processes CrashWindow starts.
const (
	crashEnv    = "TXMQ_APPDB_CRASH_DB"
	crashBizEnv = "TXMQ_APPDB_CRASH_BIZ"
)

// crashReady is the line a publisher writes on its stdout after its first commit.
const crashReady = "txmq-appdb-crash: committed"

// crashApp opens the app of the crash test: the adapter's SQL jobs and the outbox in the
// database named name.
func crashApp(ctx context.Context, t testing.TB, target *Target, name string, reg *txmq.Registry) (*txmq.App, error) {
	cfg := &txmq.Config{Logger: Quiet, Node: txmq.NodeOptions{Registry: reg}}
	target.Config(t, name, true, cfg)
	return txmq.Open(ctx, cfg)
}

// CrashWindow kills publishers at random moments (SIGKILL, mid-transaction, mid-commit,
// mid-publish, mid-claim) and checks that the messages delivered are exactly those whose
// business row committed: none lost, none of a rolled-back or cut-off transaction.
// Duplicates are allowed (at-least-once). The publishers are the test binary run again on
// the calling test alone (t.Name()), so CrashWindow must be a top-level test's whole body.
func CrashWindow(t *testing.T, target *Target) {
	if name := os.Getenv(crashEnv); name != "" {
		crashChild(t, target, name)
		return
	}
	t.Parallel()
	dbase := target.Open(t)
	db, biz := dbase.DB, dbase.Table("biz")
	ctx := context.Background()
	reg := txmq.NewRegistry()
	Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[Msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, t, target, dbase.Name, reg) // migrates both
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(target.BizDDL, biz)); err != nil {
		t.Fatal(err)
	}
	_ = app.Close(ctx)
	for round := range 4 {
		crashRound(t, exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1"),
			crashEnv+"="+dbase.Name, crashBizEnv+"="+biz, "TXMQ_APPDB_CRASH_BASE="+strconv.Itoa(round*100000))
	}
	committed := map[int]bool{}
	rows, err := db.Query("SELECT id FROM " + biz)
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
	q := Must(txmq.DeclareIn(reg2, "orders", txmq.QueueConfig[Msg]{Transactional: txmq.Require}))
	app2, err := crashApp(ctx, t, target, dbase.Name, reg2)
	if err != nil {
		t.Fatal(err)
	}
	defer app2.Close(context.Background())
	var mu sync.Mutex
	delivered := map[int]bool{}
	if err := q.Listen(app2.Node, func(_ context.Context, msgs []Msg) error {
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
	txmqtest.Eventually(t, target.CrashWait, func() bool {
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
	}, "every committed message delivered")
	mu.Lock()
	defer mu.Unlock()
	for id := range delivered {
		if !committed[id] {
			t.Errorf("message %d delivered but its transaction never committed", id)
		}
	}
	t.Logf("%d transactions committed before the kills, all delivered", len(committed))
}

// crashRound runs one publisher (cmd, with env added) and kills it at a random moment
// within 700 ms of its first committed transaction, which it reports on its stdout: a
// publisher slow to start on a loaded machine is waited for, not killed before it wrote
// anything.
func crashRound(t *testing.T, cmd *exec.Cmd, env ...string) {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == crashReady {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var failed string
	select {
	case <-ready:
		time.Sleep(time.Duration(rand.IntN(700)) * time.Millisecond) // the crash moment, at random
	case <-read:
		failed = "the publisher exited before it committed a transaction"
	case <-time.After(time.Minute):
		failed = "the publisher committed no transaction within a minute"
	}
	_ = cmd.Process.Kill()
	<-read
	_ = cmd.Wait()
	if failed != "" {
		t.Fatal(failed)
	}
}

// crashChild publishes in transactions as fast as it can until it is killed: each commits a
// business row and a message with its id, and one in five fails after publishing (rolled back).
func crashChild(t *testing.T, target *Target, name string) {
	base, _ := strconv.Atoi(os.Getenv("TXMQ_APPDB_CRASH_BASE"))
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[Msg]{Transactional: txmq.Require}))
	app, err := crashApp(ctx, t, target, name, reg)
	if err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO " + os.Getenv(crashBizEnv) + " VALUES (?)"
	boom := errors.New("rolled back on purpose")
	committed := false
	for i := base; ; i++ {
		err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, insert, i); err != nil {
				return err
			}
			if err := q.Publish(ctx, app.Node, Msg{i}); err != nil {
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
		if err == nil && !committed {
			committed = true
			fmt.Println(crashReady) // the parent's cue: the kill may come from now on
		}
	}
}
