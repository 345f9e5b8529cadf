package sqljobs

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// guardTracer counts the statements a pool sends (alone or in a pipeline) and, among them,
// the per-statement plan guards.
type guardTracer struct{ stmts, guards atomic.Int64 }

func (g *guardTracer) see(sql string) {
	g.stmts.Add(1)
	if strings.Contains(sql, "'enable_seqscan'") {
		g.guards.Add(1)
	}
}

func (g *guardTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	g.see(d.SQL)
	return ctx
}

func (g *guardTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (g *guardTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (g *guardTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	g.see(d.SQL)
}

func (g *guardTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestSessionPlanGuard checks which pools carry the plan guard per session and that a
// Backend on one sends claims, extensions, settles and the keyed path without a guard per
// statement (and its sessions really plan with enable_seqscan off and reuse generic plans),
// while a Backend on any other pool guards every statement.
func TestSessionPlanGuard(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct {
		name    string
		session bool // SessionPlanGuard on the pool
		bouncer bool // Options.PgBouncer
		want    bool // statements go without the per-statement guard
	}{
		{"plain-pool", false, false, false},
		{"session-pool", true, false, true},
		{"session-pool-pgbouncer", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			cfg, err := pgxpool.ParseConfig(w.url)
			if err != nil {
				t.Fatal(err)
			}
			if tc.bouncer {
				cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
			}
			if tc.session {
				SessionPlanGuard(cfg)
			}
			tr := &guardTracer{}
			cfg.ConnConfig.Tracer = tr
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			be := w.backendOn(pool, &Options{PgBouncer: tc.bouncer, PollInterval: 10 * time.Millisecond})
			if be.sessionGuard != tc.want {
				t.Fatalf("sessionGuard = %v, want %v", be.sessionGuard, tc.want)
			}
			queue := "q-" + tc.name
			publish(t, be, queue, "b1", time.Time{})
			if err := be.Publish(ctx, core.OutgoingBatch{ID: "k1", Queue: queue + "-keyed", Key: "k", Body: []byte("{}"), Messages: 1}); err != nil {
				t.Fatal(err)
			}
			before := tr.stmts.Load()
			guardsBefore := tr.guards.Load()
			cs := fetch(t, be, 0, all(queue), all(queue+"-keyed"))
			if len(cs) != 2 {
				t.Fatalf("claimed %d batches, want 2", len(cs))
			}
			for _, c := range cs {
				if err := be.Extend(ctx, c, 5*time.Second); err != nil {
					t.Fatalf("extend %s: %v", c.ID, err)
				}
				if err := be.Ack(ctx, c); err != nil {
					t.Fatalf("ack %s: %v", c.ID, err)
				}
			}
			stmts, guards := tr.stmts.Load()-before, tr.guards.Load()-guardsBefore
			if tc.want && guards != 0 {
				t.Errorf("%d of %d statements carried a plan guard, want none", guards, stmts)
			}
			if !tc.want && guards == 0 {
				t.Errorf("none of %d statements carried a plan guard", stmts)
			}
			var seqscan string
			if err := pool.QueryRow(ctx, "SHOW enable_seqscan").Scan(&seqscan); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: "off", false: "on"}[tc.session]; seqscan != want {
				t.Errorf("the pool's sessions have enable_seqscan=%s, want %s", seqscan, want)
			}
			var planCache string
			if err := pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&planCache); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: "force_generic_plan", false: "auto"}[tc.session]; planCache != want {
				t.Errorf("the pool's sessions have plan_cache_mode=%s, want %s", planCache, want)
			}
		})
	}
}

// TestOpenSetsSessionPlanGuard checks that Open guards the sessions of the pool it opens,
// except through PgBouncer or when the URL names enable_seqscan itself.
func TestOpenSetsSessionPlanGuard(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   bool
	}{
		{"direct", nil, true},
		{"pgbouncer", map[string]string{"txmq_pgbouncer": "true"}, false},
		{"named-by-url", map[string]string{"enable_seqscan": "on"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(w.url)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("txmq_schema", w.schema)
			q.Set("txmq_reap_interval", "-1s")
			for k, v := range tc.params {
				q.Set(k, v)
			}
			u.RawQuery = q.Encode()
			be, err := open(ctxT(t), u)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			be.o.Logger = txmqtest.DiscardLogger()
			t.Cleanup(func() { _ = be.Close() })
			if be.sessionGuard != tc.want {
				t.Errorf("sessionGuard = %v, want %v", be.sessionGuard, tc.want)
			}
		})
	}
}

// TestSessionPlanGuardKeepsNamedPlanCacheMode: a pool that names plan_cache_mode keeps it.
func TestSessionPlanGuardKeepsNamedPlanCacheMode(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:1/db?plan_cache_mode=force_custom_plan")
	if err != nil {
		t.Fatal(err)
	}
	SessionPlanGuard(cfg)
	if got := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; got != "force_custom_plan" {
		t.Errorf("plan_cache_mode = %q, want the URL's force_custom_plan", got)
	}
	if got := cfg.ConnConfig.RuntimeParams["enable_seqscan"]; got != "off" {
		t.Errorf("enable_seqscan = %q, want off", got)
	}
}

// TestPlansReused checks that the claim statement is planned once per session and its generic
// plan reused afterwards, both on a pool with the plan guard per session and behind the
// per-statement guard (which sets plan_cache_mode for its transaction): Postgres' "auto" mode
// would plan the claim anew at every execution.
func TestPlansReused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, session := range []bool{false, true} {
		t.Run(map[bool]string{false: "guard-per-statement", true: "session-guard"}[session], func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			cfg, err := pgxpool.ParseConfig(w.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1 // every statement on one session, whose prepared statements are read below
			if session {
				SessionPlanGuard(cfg)
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			be := w.backendOn(pool, &Options{})
			const rounds = 12
			for i := range rounds {
				if len(fetch(t, be, 0, all("q"))) != 0 {
					t.Fatalf("round %d claimed a batch from an empty queue", i)
				}
			}
			var generic, custom int64
			// Summed over every claim statement the session prepared: a fetch may run more than
			// one shape of the claim (a loaded machine made two of the twelve differ once), and
			// each must be planned generically.
			if err := pool.QueryRow(ctx, `SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0) FROM pg_prepared_statements
				WHERE statement LIKE '%txmq_jobs_lease_seq%' AND statement LIKE '%WITH req AS%'`).Scan(&generic, &custom); err != nil {
				t.Fatalf("reading the claim's prepared statement: %v", err)
			}
			if custom != 0 || generic < rounds {
				t.Errorf("claim planned %d custom and %d generic plans over %d executions, want 0 custom", custom, generic, rounds)
			}
		})
	}
}
