package all_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/all"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestSwapDrill is the operator's swap on real processes: one app binary (internal/drillapp)
// runs as two processes on SQL jobs (a postgres:// backend URL) publishing in transactions and
// consuming slowly, so a backlog builds; one is killed with batches in flight, the other
// stopped; rows are left in the outbox; then both restart with TXMQ_BACKEND changed to Redis
// and TXMQ_DRAIN_BACKENDS naming the old URL, while they keep publishing. Every committed
// message must be delivered at least once, the outbox and the old backend must end empty, and
// the old backend must be reported drained. The backends are reached through their URL
// schemes only.
func TestSwapDrill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the drill app as separate processes")
	}
	ctx := context.Background()
	pgURL := testenv.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	pool := testenv.PostgresPool(t)
	// One schema for the outbox, dead letters, the SQL jobs backend's tables and the drill's
	// own: TXMQ_SCHEMA and the URL's txmq_schema must agree (see Config.Schema).
	schema := testenv.PostgresSchema(t, pool)
	oldURL := withParam(pgURL, "txmq_schema", schema)
	newURL := withParam(redisURL, "txmq_prefix", testenv.UniqueName("drill"))
	for _, s := range []string{"postgres", "redis"} {
		if !registered(s) {
			t.Fatalf("the %s:// scheme is not registered: the drill needs adapters/sqljobs and adapters/redis in adapters/all", s)
		}
	}

	bin := filepath.Join(t.TempDir(), "drillapp")
	build := exec.Command("go", "build", "-o", bin, "./internal/drillapp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/drillapp: %v\n%s", err, out)
	}
	env := func(backend string, drain ...string) []string {
		e := append(os.Environ(),
			"TXMQ_BACKEND="+backend, "TXMQ_DATABASE_URL="+pgURL, "TXMQ_SCHEMA="+schema,
			"TXMQ_DRAIN_BACKENDS="+strings.Join(drain, ","), "TXMQ_DRAIN_CHECK_INTERVAL=300ms",
			"DRILL_SLOW=25ms", "DRILL_PUBLISH_EVERY=3ms", "DRILL_LEASE=2s")
		return e
	}

	// Phase 1: two processes on SQL jobs; consuming is slower than publishing.
	a := startDrill(t, bin, env(oldURL), "sqljobs-a")
	b := startDrill(t, bin, env(oldURL), "sqljobs-b")
	txmqtest.Eventually(t, 30*time.Second, func() bool {
		return count(t, pool, schema, "drill_seen") >= 40 && count(t, pool, schema, "drill_published") >= 400
	}, "phase 1 publishing and consuming")
	start := time.Now()
	phase := func(what string) { t.Logf("drill %5.1fs: %s", time.Since(start).Seconds(), what) }
	phase("phase 1 ran")
	a.kill() // a crash: its batches in flight come back after their leases
	b.stop(t)

	old, err := txmq.OpenBackend(ctx, oldURL)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if d := depth(t, old); d.Ready+d.InFlight+d.Delayed == 0 {
		t.Fatalf("the drill left nothing in the old backend: %+v", d)
	}

	// Rows in the outbox: an app-managed transaction commits them while no relay runs.
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "drill", txmq.QueueConfig[struct {
		K string `json:"k"`
	}]{Transactional: txmq.Require, MaxBatchMessages: 20, MaxConcurrentBatches: txmq.Cap(4)})
	pub, err := txmq.NewNode(memory.New(nil), &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tctx := store.WithTx(ctx, tx)
	for i := range 30 {
		k := fmt.Sprintf("outbox-%d", i)
		if _, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+".drill_published (k) VALUES ($1)", k); err != nil {
			t.Fatal(err)
		}
		if err := q.Publish(tctx, pub, struct {
			K string `json:"k"`
		}{k}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_ = pub.Close(ctx)
	if n := backlog(t, store); n == 0 {
		t.Fatal("no rows in the outbox before the swap")
	}

	phase("outbox rows written")
	// Phase 2: the same binary, TXMQ_BACKEND changed to Redis, the old URL to drain.
	c := startDrill(t, bin, env(newURL, oldURL), "redis-c")
	d := startDrill(t, bin, env(newURL, oldURL), "redis-d")
	time.Sleep(3 * time.Second) // publishing goes on during the drain
	c.signal(t, syscall.SIGUSR1)
	d.signal(t, syscall.SIGUSR1)
	txmqtest.Eventually(t, 90*time.Second, func() bool { return missing(t, pool, schema) == 0 }, func() string {
		return fmt.Sprintf("every committed message delivered: %d of %d missing", missing(t, pool, schema), count(t, pool, schema, "drill_published"))
	})
	phase("every message delivered")
	txmqtest.Eventually(t, 30*time.Second, func() bool { return depth(t, old) == core.Depth{} }, "the old backend empty")
	txmqtest.Eventually(t, 30*time.Second, func() bool { return backlog(t, store) == 0 }, "the outbox empty")
	txmqtest.Eventually(t, 30*time.Second, func() bool { return c.logged("old backend drained") && d.logged("old backend drained") }, "both processes report the old backend drained")
	phase("old backend drained")
	c.stop(t)
	d.stop(t)
	phase("stopped")
	if n := missing(t, pool, schema); n != 0 {
		t.Fatalf("%d committed messages never delivered", n)
	}
	t.Logf("drill: %d messages published, %d deliveries", count(t, pool, schema, "drill_published"), count(t, pool, schema, "drill_seen"))
}

// drillProc is one running drill app.
type drillProc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs strings.Builder
	done chan error
}

func startDrill(t *testing.T, bin string, env []string, name string) *drillProc {
	t.Helper()
	p := &drillProc{name: name, cmd: exec.Command(bin), done: make(chan error, 1)}
	p.cmd.Env = env
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s logs:\n%s", p.name, p.output())
		}
	})
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "ready") {
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("%s exited at start: %v\n%s", name, err, p.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30s\n%s", name, p.output())
	}
	return p
}

func (p *drillProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

func (p *drillProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *drillProc) logged(s string) bool { return strings.Contains(p.output(), s) }

func (p *drillProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// stop ends the process gracefully and requires exit code 0.
func (p *drillProc) stop(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%s exited with %v\n%s", p.name, err, p.output())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not stop within 40s", p.name)
	}
}

// kill ends the process at once (a crash); killing an exited process is a no-op.
func (p *drillProc) kill() { _ = p.cmd.Process.Kill() }

func withParam(raw, key, value string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + key + "=" + value
}

func registered(scheme string) bool {
	for _, s := range core.Schemes() {
		if s == scheme {
			return true
		}
	}
	return false
}

func count(t *testing.T, pool *pgxpool.Pool, schema, table string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, table}.Sanitize()).Scan(&n)
	if err != nil {
		return 0 // the app creates the tables at start
	}
	return n
}

func missing(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+s+".drill_published p WHERE NOT EXISTS (SELECT 1 FROM "+s+".drill_seen x WHERE x.k = p.k)").Scan(&n); err != nil {
		t.Fatalf("counting missing messages: %v", err)
	}
	return n
}

func depth(t *testing.T, b txmq.Backend) core.Depth {
	t.Helper()
	d, err := b.Depths(context.Background(), []string{"drill"})
	if err != nil {
		t.Fatalf("Depths of the old backend: %v", err)
	}
	return d["drill"]
}

func backlog(t *testing.T, s *outbox.Store) int64 {
	t.Helper()
	b, err := s.Backlog(context.Background())
	if err != nil {
		t.Fatalf("outbox backlog: %v", err)
	}
	return b["drill"].Rows
}
