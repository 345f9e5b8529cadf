// Command tracepick shows where the time of a transactional pickup goes (RunInTx with one
// publish -> the listener), step by step, on the sqljobs or the Redis backend:
//
//	go run ./tracepick -be sql   -n 200 -gap 5ms
//	go run ./tracepick -be redis -n 200 -gap 5ms
//
// It runs -n RunInTx transactions one after the other, -gap apart, each publishing one
// message on a Require queue that one node listens to, with the outbox and the sqljobs
// schema in fresh schemas of the Postgres at $TXMQ_POSTGRES_URL (Redis: 127.0.0.1:6379 under
// a fresh key prefix). The backend is wrapped to time its Publish and the Fetch that returns
// the message, and the pool traces every statement. It prints p50/p90/p99 of each step: the
// publish call to RunInTx's return (the caller's INSERT and COMMIT), that to the backend's
// Publish (the after-commit publisher, and its lease when it takes one), the Publish itself,
// Publish to the Fetch that returns the message (the wake-up and the claim), and that to the
// listener; with -show N, the statements of the first N samples with their start and end
// relative to the publish call. Everything is dropped at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/redis"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// The instants (Unix ns) of the latest sample's steps, written by the wrappers.
var pubStart, pubEnd, fetchRet atomic.Int64

// stamps times a backend's Publish and the Fetch that returns claims.
func stampPublish(publish func() error) error {
	pubStart.Store(time.Now().UnixNano())
	err := publish()
	pubEnd.Store(time.Now().UnixNano())
	return err
}

func stampFetch(c []*core.Claim, err error) ([]*core.Claim, error) {
	if len(c) > 0 {
		fetchRet.Store(time.Now().UnixNano())
	}
	return c, err
}

// sqlBE and redisBE wrap a backend; embedding keeps its optional capabilities.
type sqlBE struct{ *sqljobs.Backend }

func (b sqlBE) Publish(ctx context.Context, ob core.OutgoingBatch) error {
	return stampPublish(func() error { return b.Backend.Publish(ctx, ob) })
}

func (b sqlBE) Fetch(ctx context.Context, r core.FetchRequest) ([]*core.Claim, error) {
	return stampFetch(b.Backend.Fetch(ctx, r))
}

type redisBE struct{ *redis.Backend }

func (b redisBE) Publish(ctx context.Context, ob core.OutgoingBatch) error {
	return stampPublish(func() error { return b.Backend.Publish(ctx, ob) })
}

func (b redisBE) Fetch(ctx context.Context, r core.FetchRequest) ([]*core.Claim, error) {
	return stampFetch(b.Backend.Fetch(ctx, r))
}

// event is one statement (or pipelined batch) the pool ran.
type event struct {
	start, end int64
	sql        string
}

// tracer records every statement and batch of the pool.
type tracer struct {
	mu     sync.Mutex
	events []event
}

type traceKey struct{}

func short(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 70 {
		sql = sql[:70]
	}
	return sql
}

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, event{start: time.Now().UnixNano(), sql: short(d.SQL)})
}

func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.end(ctx)
}

func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	sql := ""
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		sql = d.Batch.QueuedQueries[len(d.Batch.QueuedQueries)-1].SQL
	}
	return context.WithValue(ctx, traceKey{}, event{start: time.Now().UnixNano(), sql: "batch: " + short(sql)})
}

func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.end(ctx)
}

func (t *tracer) end(ctx context.Context) {
	if e, ok := ctx.Value(traceKey{}).(event); ok {
		e.end = time.Now().UnixNano()
		t.mu.Lock()
		t.events = append(t.events, e)
		t.mu.Unlock()
	}
}

// show prints the statements that overlap [from, to], relative to from.
func (t *tracer) show(from, to int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if e.end >= from && e.start <= to {
			fmt.Printf("    %10v .. %10v  %s\n", time.Duration(e.start-from), time.Duration(e.end-from), e.sql)
		}
	}
}

func main() {
	which := flag.String("be", "sql", "backend: sql (sqljobs) or redis")
	n := flag.Int("n", 200, "samples")
	gap := flag.Duration("gap", 5*time.Millisecond, "pause between samples")
	showN := flag.Int("show", 0, "print the statements of the first N samples")
	flag.Parse()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	url := os.Getenv("TXMQ_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		log.Fatal(err)
	}
	tr := &tracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := fmt.Sprintf("tracepick_%d", time.Now().UnixNano())
	defer func() {
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+"_j CASCADE")
	}()
	var be txmq.Backend
	switch *which {
	case "sql":
		o := &sqljobs.Options{Schema: schema + "_j", ReapInterval: -1, Logger: quiet}
		if err := sqljobs.Migrate(ctx, pool, o); err != nil {
			log.Fatal(err)
		}
		b, err := sqljobs.New(ctx, pool, o)
		if err != nil {
			log.Fatal(err)
		}
		be = sqlBE{b}
	case "redis":
		b, err := redis.New(&redis.Options{Prefix: schema + ":"})
		if err != nil {
			log.Fatal(err)
		}
		be = redisBE{b}
	default:
		log.Fatalf("-be %q: want sql or redis", *which)
	}
	defer be.Close()
	o := &outbox.Options{Schema: schema, Backend: be, Logger: quiet}
	if err := outbox.Migrate(ctx, pool, o); err != nil {
		log.Fatal(err)
	}
	s, err := outbox.New(pool, o)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "tracepick", txmq.QueueConfig[int64]{Transactional: txmq.Require})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: s})
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan int64, 1)
	if err := q.Listen(node, func(context.Context, []int64) error {
		got <- time.Now().UnixNano()
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	time.Sleep(300 * time.Millisecond)

	steps := []string{"publish -> RunInTx returned", "-> backend Publish called", "backend Publish", "-> Fetch returned it", "-> listener", "total"}
	lat := make([][]time.Duration, len(steps))
	for i := range *n {
		t0 := time.Now().UnixNano()
		if err := s.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return q.Publish(ctx, node, t0) }); err != nil {
			log.Fatal(err)
		}
		tc := time.Now().UnixNano()
		run := <-got
		at := []int64{t0, tc, pubStart.Load(), pubEnd.Load(), fetchRet.Load(), run}
		for k := range len(steps) - 1 {
			lat[k] = append(lat[k], time.Duration(at[k+1]-at[k]))
		}
		lat[len(steps)-1] = append(lat[len(steps)-1], time.Duration(run-t0))
		if i < *showN {
			fmt.Printf("sample %d: RunInTx returned %v, Publish %v..%v, Fetch returned %v, listener %v\n", i+1,
				time.Duration(tc-t0), time.Duration(at[2]-t0), time.Duration(at[3]-t0), time.Duration(at[4]-t0), time.Duration(run-t0))
			tr.show(t0, run)
		}
		time.Sleep(*gap)
	}
	fmt.Printf("transactional pickup, %s backend, %d samples %v apart:\n", *which, *n, *gap)
	for k, name := range steps {
		d := lat[k]
		slices.Sort(d)
		at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))].Round(time.Microsecond) }
		fmt.Printf("  %-28s p50 %9v  p90 %9v  p99 %9v\n", name, at(0.5), at(0.9), at(0.99))
	}
}
