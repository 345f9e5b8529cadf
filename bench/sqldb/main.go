// Command sqldb compares txmq's SQL jobs on MySQL/MariaDB (adapters/mysql) and on a SQLite
// file (adapters/sqlite) with SQL jobs on PostgreSQL (adapters/sqljobs) and with the memory
// backend, side by side in one run, on the same machine and workload:
//
//	go run ./sqldb -pg postgres://postgres@127.0.0.1:5432/test?sslmode=disable -mysql mysql://root@127.0.0.1:3306/test
//	go run ./sqldb -backends postgres,sqlite,memory
//
// Scenarios: burning down a stored backlog with 100 messages per batch (-n messages) and with
// one message per batch (-n/5), messages/s; the pickup latency of single messages published
// one at a time to an idle node (-samples), p50/p99, by the listening node's own Backend
// ("same process") and by another Backend on the same database ("another process": MySQL
// and SQLite have no NOTIFY, so that one waits for its poll; memory has no other process).
// Each backend gets a fresh schema (a database on MySQL, a file in a temporary directory on
// SQLite), dropped at the end. Ratios are each backend's figure over PostgreSQL's.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	txmqmysql "github.com/txmq/txmq/adapters/mysql"
	txmqsqlite "github.com/txmq/txmq/adapters/sqlite"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/bench/internal/txmqbench"
	"github.com/txmq/txmq/core"
)

var (
	pgURL    = flag.String("pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	myURL    = flag.String("mysql", "mysql://root@127.0.0.1:3306/test", "MySQL/MariaDB URL")
	msgs     = flag.Int("n", 20000, "messages in the 100-msgs/batch backlog; the one-per-batch backlog uses n/5")
	workers  = flag.Int("workers", 50, "MaxConcurrentBatches of the consuming node")
	conns    = flag.Int("conns", 20, "connections of each backend's pool")
	samples  = flag.Int("samples", 100, "pickup latency samples")
	which    = flag.String("backends", "postgres,mysql,sqlite,memory", "backends to run, comma-separated (postgres first: the ratios' baseline)")
	quiet    = slog.New(slog.NewTextHandler(io.Discard, nil))
	schemaNo = time.Now().UnixNano() % 1e9
)

// benchMsg is the message the scenarios store.
type benchMsg = txmqbench.Msg

// opener makes a fresh backend and returns it with its cleanup.
type opener func(ctx context.Context) (core.Backend, func())

func main() {
	flag.Parse()
	ctx := context.Background()
	openers := map[string]opener{"postgres": openPostgres, "mysql": openMySQL, "sqlite": openSQLite, "memory": openMemory}
	type figures struct{ b100, b1, p50, p99, xp50, xp99 float64 }
	got := map[string]figures{}
	var names []string
	for _, name := range strings.Split(*which, ",") {
		open, ok := openers[name]
		if !ok {
			log.Fatalf("-backends: unknown backend %q; use postgres, mysql, sqlite or memory", name)
		}
		names = append(names, name)
		b := struct {
			name string
			open opener
		}{name, open}
		var f figures
		f.b100 = backlog(ctx, b.open, *msgs, 100)
		f.b1 = backlog(ctx, b.open, *msgs/5, 1)
		be, done := b.open(ctx)
		p50, p99 := txmqbench.Latency(ctx, be, *samples, quiet)
		done()
		f.p50, f.p99 = float64(p50), float64(p99)
		if b.name != "memory" { // a memory backend lives in one process
			p50, p99 = crossLatency(ctx, b.open, *samples)
			f.xp50, f.xp99 = float64(p50), float64(p99)
		}
		got[b.name] = f
		fmt.Printf("%-8s backlog 100 msgs/batch %8.0f msgs/s, 1 msg/batch %7.0f msgs/s, pickup p50 %v p99 %v, from another process p50 %v p99 %v\n",
			b.name, f.b100, f.b1, time.Duration(f.p50), time.Duration(f.p99), time.Duration(f.xp50), time.Duration(f.xp99))
	}
	pg, ok := got["postgres"]
	if !ok {
		return
	}
	for _, name := range names[1:] {
		o := got[name]
		cross := "from another process n/a"
		if o.xp50 > 0 {
			cross = fmt.Sprintf("from another process p50 %.2fx, p99 %.2fx", o.xp50/pg.xp50, o.xp99/pg.xp99)
		}
		fmt.Printf("%s/postgres: backlog 100 msgs/batch %.2fx, 1 msg/batch %.2fx, pickup p50 %.2fx, p99 %.2fx, %s\n",
			name, o.b100/pg.b100, o.b1/pg.b1, o.p50/pg.p50, o.p99/pg.p99, cross)
	}
}

// backlog stores n messages in batches of perBatch on a fresh backend, then times a node
// burning them down with a no-op listener; it returns messages per second.
func backlog(ctx context.Context, open opener, n, perBatch int) float64 {
	be, done := open(ctx)
	defer done()
	reg, q, _ := txmqbench.Backlog(ctx, be, n, perBatch, *workers, quiet)
	txmqbench.WaitReady(ctx, be, []string{"bench"}, int64((n+perBatch-1)/perBatch))
	elapsed := txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet, nil, nil)
	return float64(n) / elapsed.Seconds()
}

// openPostgres makes a fresh schema, migrated, and a sqljobs backend on it.
func openPostgres(ctx context.Context) (core.Backend, func()) {
	cfg, err := pgxpool.ParseConfig(*pgURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	schemaNo++
	schema := fmt.Sprintf("bench_sqldb_%d", schemaNo)
	if err := sqljobs.Migrate(ctx, pool, &sqljobs.Options{Schema: schema}); err != nil {
		log.Fatal(err)
	}
	be, err := sqljobs.New(ctx, pool, &sqljobs.Options{Schema: schema, ReapInterval: -1, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return be, func() {
		_ = be.Close()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			log.Printf("dropping schema %s: %v", schema, err)
		}
		pool.Close()
	}
}

// openMySQL makes a fresh database, migrated, and a mysql backend on it.
func openMySQL(ctx context.Context) (core.Backend, func()) {
	u, err := url.Parse(*myURL)
	if err != nil {
		log.Fatal(err)
	}
	schemaNo++
	schema := fmt.Sprintf("bench_sqldb_%d", schemaNo)
	q := u.Query()
	q.Set("txmq_schema", schema)
	q.Set("txmq_reap_interval", "-1s")
	u.RawQuery = q.Encode()
	be, err := core.OpenBackend(ctx, u.String())
	if err != nil {
		log.Fatal(err)
	}
	db := be.(*txmqmysql.Backend).DB()
	db.SetMaxOpenConns(*conns)
	db.SetMaxIdleConns(*conns)
	return be, func() {
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+schema); err != nil {
			log.Printf("dropping database %s: %v", schema, err)
		}
		_ = be.Close()
	}
}

// openSQLite makes a fresh file in a temporary directory, migrated, and a sqlite backend on
// it (the durable defaults: WAL, synchronous=FULL).
func openSQLite(ctx context.Context) (core.Backend, func()) {
	dir, err := os.MkdirTemp("", "bench-sqldb-sqlite")
	if err != nil {
		log.Fatal(err)
	}
	be, err := core.OpenBackend(ctx, "sqlite://"+filepath.Join(dir, "jobs.db")+"?txmq_reap_interval=-1s")
	if err != nil {
		log.Fatal(err)
	}
	return be, func() {
		_ = be.Close()
		_ = os.RemoveAll(dir)
	}
}

// openMemory makes a memory backend.
func openMemory(context.Context) (core.Backend, func()) {
	be := memory.New(nil)
	return be, func() { _ = be.Close() }
}

// crossLatency publishes n single messages, one at a time, through one backend and listens
// on another one of the same schema (as two processes would), and returns the p50 and p99 of
// the time from Publish to the listener.
func crossLatency(ctx context.Context, open opener, n int) (time.Duration, time.Duration) {
	be, done := open(ctx)
	defer done()
	other, closeOther := sibling(ctx, be)
	defer closeOther()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "xlat", txmq.QueueConfig[int64]{Transactional: txmq.Try})
	pub, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := pub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer pub.Close(ctx)
	sub, err := txmq.NewNode(other, &txmq.NodeOptions{Registry: reg, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	lat := make(chan time.Duration, n)
	if err := q.Listen(sub, func(_ context.Context, ms []int64) error {
		for _, sent := range ms {
			lat <- time.Since(time.Unix(0, sent))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer sub.Close(ctx)
	time.Sleep(300 * time.Millisecond)
	var out []time.Duration
	for range n {
		if err := q.Publish(ctx, pub, time.Now().UnixNano()); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	return txmqbench.Percentiles(out)
}

// sibling opens a second backend on be's schema, as another process would.
func sibling(ctx context.Context, be core.Backend) (core.Backend, func()) {
	switch b := be.(type) {
	case *sqljobs.Backend:
		o, err := sqljobs.New(ctx, b.Pool(), &sqljobs.Options{Schema: b.Schema(), ReapInterval: -1, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		return o, func() { _ = o.Close() }
	case *txmqsqlite.Backend:
		db, err := txmqsqlite.OpenDB(sqliteFile(ctx, b), nil)
		if err != nil {
			log.Fatal(err)
		}
		o, err := txmqsqlite.New(ctx, db, &txmqsqlite.Options{ReapInterval: -1, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		return o, func() { _ = o.Close(); _ = db.Close() }
	case *txmqmysql.Backend:
		o, err := txmqmysql.New(ctx, b.DB(), &txmqmysql.Options{Schema: b.Schema(), ReapInterval: -1, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		return o, func() { _ = o.Close() }
	}
	log.Fatalf("no sibling for %T", be)
	return nil, nil
}

// sqliteFile returns the file a sqlite backend runs on (PRAGMA database_list).
func sqliteFile(ctx context.Context, be *txmqsqlite.Backend) string {
	var seq int
	var name, file string
	if err := be.DB().QueryRowContext(ctx, "PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		log.Fatal(err)
	}
	return file
}
