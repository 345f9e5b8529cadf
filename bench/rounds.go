package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

// The rounds scenario: SQL jobs at one message per batch against River at the configuration
// River's own benchmark (cmd/river/riverbench) uses for throughput, in interleaved rounds, each
// with what it cost per message on the server.
var (
	roundsN     = flag.Int("rounds-n", 100000, "rounds scenario: one-message batches (River jobs) stored before each timed burn-down")
	roundsCount = flag.Int("rounds-count", 3, "rounds scenario: interleaved rounds (one burn-down of each side per round)")
	roundsSides = flag.String("sides", "river,txmq", "rounds scenario: sides of each round, in order: river, txmq (the pool has the plan guard per session, as Open's), txmq-guarded (the app's pool: a plan guard sent with each statement), txmq-nofairidx (txmq without the fair_key index), txmq-fullprioidx (txmq with the full priority index of before migration 0008), txmq-autoplans (txmq's pool at plan_cache_mode auto: a custom plan of the claim at every execution)")
	txWorkers   = flag.Int("txmq-workers", 100, "rounds scenario: txmq MaxConcurrentBatches")
	rvWorkers   = flag.Int("river-workers", 2000, "River MaxWorkers when tuned (riverbench: 2,000)")
	rvCooldown  = flag.Duration("river-cooldown", 2*time.Millisecond, "River FetchCooldown when tuned (riverbench: 2 ms)")
	rvPoll      = flag.Duration("river-poll", 20*time.Millisecond, "River FetchPollInterval when tuned (riverbench: 20 ms)")
)

// riverTuned describes the tuned River configuration, for the output.
func riverTuned() string {
	return fmt.Sprintf("River tuned as its own benchmark (riverbench): MaxWorkers %d, FetchCooldown %v, FetchPollInterval %v", *rvWorkers, *rvCooldown, *rvPoll)
}

// cost is what one timed burn-down did and cost.
type cost struct {
	msgs    int
	elapsed time.Duration
	stmts   int64         // statements the server ran (pg_stat_statements), else the client sent
	wal     int64         // WAL bytes written
	pgCPU   time.Duration // CPU of every process of the Postgres server; -1: not local
	proc    time.Duration // CPU of this process
	indexes int           // txmq: the jobs table's indexes a plain row is in; 0: not counted
}

func (c cost) rate() float64 { return float64(c.msgs) / c.elapsed.Seconds() }

func (c cost) per(v float64) float64 { return v / float64(c.msgs) }

func (c cost) String() string {
	pg := "n/a"
	if c.pgCPU >= 0 {
		pg = fmt.Sprintf("%.1f", c.per(float64(c.pgCPU.Microseconds())))
	}
	return fmt.Sprintf("%8.0f msgs/s  %6.3f stmts/msg  %6.0f WAL B/msg  Postgres CPU %5s µs/msg  process CPU %5.1f µs/msg",
		c.rate(), c.per(float64(c.stmts)), c.per(float64(c.wal)), pg, c.per(float64(c.proc.Microseconds()))) + c.entries()
}

// entries renders the index entries written per message: a publish and a claim each write one
// to every index the row is in (the claim moves run_at, so it is never a HOT update; the
// delete of the ack writes none).
func (c cost) entries() string {
	if c.indexes == 0 {
		return ""
	}
	return fmt.Sprintf("  index entries %d/msg", 2*c.indexes)
}

// window holds the readings the server's counters at the start of a timed window.
type window struct {
	admin    *pgxpool.Pool
	stmts    int64
	pss      bool // pg_stat_statements answers
	counter  *stmtCounter
	clientN  int64
	lsn      string
	pg       map[int]time.Duration
	proc     time.Duration
	started  time.Time
	postgres int // the postmaster's pid, 0 when Postgres is not local
}

// startWindow takes the readings a window starts from; counter counts the statements the
// measured side's pool sends, the fallback when pg_stat_statements is not installed.
func startWindow(ctx context.Context, admin *pgxpool.Pool, counter *stmtCounter) *window {
	m := &window{admin: admin, counter: counter, postgres: postmaster(ctx, admin)}
	m.stmts, m.pss = serverStatements(ctx, admin)
	m.clientN = counter.n.Load()
	if err := admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&m.lsn); err != nil {
		log.Fatal(err)
	}
	m.pg = serverCPU(m.postgres)
	m.proc = processCPU()
	m.started = time.Now()
	return m
}

// stop ends the window after msgs messages.
func (m *window) stop(ctx context.Context, msgs int) cost {
	c := cost{msgs: msgs, elapsed: time.Since(m.started), proc: processCPU() - m.proc, pgCPU: -1}
	if m.pg != nil {
		c.pgCPU = 0
		for pid, t := range serverCPU(m.postgres) {
			c.pgCPU += t - m.pg[pid] // a process started in the window counts whole
		}
	}
	if err := m.admin.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", m.lsn).Scan(&c.wal); err != nil {
		log.Fatal(err)
	}
	if n, ok := serverStatements(ctx, m.admin); ok && m.pss {
		c.stmts = n - m.stmts - 2 // less this meter's own two reads
	} else {
		c.stmts = m.counter.n.Load() - m.clientN
	}
	return c
}

// serverStatements sums pg_stat_statements' calls; false when it is not installed.
func serverStatements(ctx context.Context, admin *pgxpool.Pool) (int64, bool) {
	var n int64
	if err := admin.QueryRow(ctx, "SELECT COALESCE(sum(calls), 0)::bigint FROM pg_stat_statements").Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// postmaster returns the pid of the Postgres server's main process when it runs on this
// machine (the parent of the admin connection's backend), else 0.
func postmaster(ctx context.Context, admin *pgxpool.Pool) int {
	var pid int
	if err := admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		log.Fatal(err)
	}
	f := procStat(pid)
	if f == nil {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// serverCPU returns the CPU time of the postmaster and each of its children (backends,
// WAL writer, checkpointer, autovacuum), or nil when Postgres is not local.
func serverCPU(postmaster int) map[int]time.Duration {
	if postmaster == 0 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int]time.Duration{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if f == nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != postmaster && pid != postmaster {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	return out
}

// procStat returns the fields of /proc/pid/stat after the command name (state first), or nil.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
}

// stmtCounter counts the statements a pool sends, each statement of a pipeline too.
type stmtCounter struct{ n atomic.Int64 }

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// sidePool opens a pool of -conns connections for one side; session gives it the plan
// guard per session (sqljobs.SessionPlanGuard), params are startup parameters set first (a
// parameter SessionPlanGuard would set and params names keeps params' value).
func sidePool(ctx context.Context, app string, counter *stmtCounter, session bool, params map[string]string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = int32(*conns)
	cfg.ConnConfig.Tracer = counter
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if session {
		sqljobs.SessionPlanGuard(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return pool
}

// riverRound stores n jobs, then times a tuned River client working them.
// prio inserts job i at InsertOpts.Priority 1+i%4 (River's priorities are 1 to 4).
func riverRound(ctx context.Context, admin *pgxpool.Pool, n int, prio bool) cost {
	counter := &stmtCounter{}
	pool := sidePool(ctx, "bench_river", counter, false, nil)
	defer pool.Close()
	schema, drop := freshSchema(ctx, pool, "bench_river")
	defer drop()
	var got atomic.Int64
	done := make(chan struct{})
	c := riverClientQueues(ctx, pool, schema, true, []string{river.QueueDefault}, *rvWorkers, func(*river.Job[noopArgs]) {
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	params := make([]river.InsertManyParams, 0, 5000)
	for i := range n {
		p := river.InsertManyParams{Args: noopArgs{ID: i}}
		if prio {
			p.InsertOpts = &river.InsertOpts{Priority: 1 + i%4}
		}
		params = append(params, p)
		if len(params) == cap(params) || i == n-1 {
			if _, err := c.InsertManyFast(ctx, params); err != nil {
				log.Fatal(err)
			}
			params = params[:0]
		}
	}
	analyzeTable(ctx, pool, schema, "river_job")
	m := startWindow(ctx, admin, counter)
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		log.Fatalf("river: worked %d of %d", got.Load(), n)
	}
	r := m.stop(ctx, n)
	_ = c.Stop(ctx)
	return r
}

// txmqRound stores n one-message batches, then times one node with MaxConcurrentBatches
// -txmq-workers consuming them; session gives the pool the plan guard per session.
//
// ddl runs after the migrations (the side's variant of the schema, {{s}} its schema); the
// round then prints how many of txmq_jobs' indexes a plain row (priority 0, no ordering or
// fairness key) has an entry in: a publish and a claim (which moves run_at, so it is never a
// HOT update) each write one entry to each.
func txmqRound(ctx context.Context, admin *pgxpool.Pool, n int, session bool, ddl []string, params map[string]string) (fill, r cost) {
	counter := &stmtCounter{}
	pool := sidePool(ctx, "bench_txmq", counter, session, params)
	defer pool.Close()
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	for _, d := range ddl {
		if _, err := pool.Exec(ctx, strings.ReplaceAll(d, "{{s}}", pgx.Identifier{schema}.Sanitize())); err != nil {
			log.Fatal(err)
		}
	}
	// The indexes a plain row is in: those without a predicate, and the fair index's
	// (fair_key is '' on a plain row) and the priority index's when they have none.
	var idx int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'txmq_jobs' AND i.indpred IS NULL`, schema).Scan(&idx); err != nil {
		log.Fatal(err)
	}
	fw := startWindow(ctx, admin, counter)
	reg, q, _ := txmqbench.Backlog(ctx, be, n, 1, *txWorkers, quiet)
	txmqbench.WaitReady(ctx, be, []string{"bench"}, int64(n))
	fill = fw.stop(ctx, n)
	analyzeTable(ctx, pool, schema, "txmq_jobs")
	var m *window
	txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet,
		func() { m = startWindow(ctx, admin, counter) },
		func() { r = m.stop(ctx, n) })
	r.indexes = idx
	return fill, r
}

// runRounds runs the rounds scenario and prints each round and the summary.
func runRounds(ctx context.Context) {
	admin := newPool(ctx, "bench_admin")
	defer admin.Close()
	sides := strings.Split(*roundsSides, ",")
	for i, s := range sides {
		sides[i] = strings.TrimSpace(s)
		switch sides[i] {
		case "river", "txmq", "txmq-guarded", "txmq-nofairidx", "txmq-fullprioidx", "txmq-autoplans":
		default:
			log.Fatalf("-sides: unknown side %q; use river, txmq, txmq-guarded, txmq-nofairidx, txmq-fullprioidx or txmq-autoplans", s)
		}
	}
	_, pss := serverStatements(ctx, admin)
	src := "statements the client sent (pg_stat_statements is not installed)"
	if pss {
		src = "statements the server ran (pg_stat_statements)"
	}
	fmt.Printf("rounds: %d interleaved rounds of %s; each burns down %d stored one-message batches (River: jobs)\n", *roundsCount, strings.Join(sides, ", "), *roundsN)
	fmt.Printf("  txmq: one node, MaxConcurrentBatches %d; %s; each side its own pool of %d connections; ANALYZE before consuming %v\n", *txWorkers, riverTuned(), *conns, *analyze)
	fmt.Printf("  per message: %s, WAL bytes (pg_current_wal_lsn), CPU of every Postgres process (/proc) and of this process\n", src)
	fmt.Printf("  load average at start: %s\n", loadAvg())
	results := map[string][]cost{}
	for r := range *roundsCount {
		for _, side := range sides {
			var c, fill cost
			switch side {
			case "river":
				c = riverRound(ctx, admin, *roundsN, false)
			case "txmq":
				fill, c = txmqRound(ctx, admin, *roundsN, true, nil, nil)
			case "txmq-guarded":
				fill, c = txmqRound(ctx, admin, *roundsN, false, nil, nil)
			case "txmq-nofairidx":
				fill, c = txmqRound(ctx, admin, *roundsN, true, []string{"DROP INDEX {{s}}.txmq_jobs_fair_idx"}, nil)
			case "txmq-fullprioidx":
				// Before migration 0008: the priority index holds every row.
				fill, c = txmqRound(ctx, admin, *roundsN, true, []string{
					"CREATE INDEX txmq_jobs_priority_idx ON {{s}}.txmq_jobs (queue, priority, run_at)",
					"DROP INDEX {{s}}.txmq_jobs_raised_idx"}, nil)
			case "txmq-autoplans":
				fill, c = txmqRound(ctx, admin, *roundsN, true, nil, map[string]string{"plan_cache_mode": "auto"})
			}

			if fill.msgs > 0 {
				fmt.Printf("  round %d %-16s fill %s\n", r+1, side, fill)
			}
			results[side] = append(results[side], c)
			fmt.Printf("  round %d %-16s %s\n", r+1, side, c)
		}
	}
	fmt.Printf("  load average at end: %s\n", loadAvg())
	fmt.Printf("summary (min / median / max over rounds):\n")
	for _, side := range sides {
		cs := results[side]
		fmt.Printf("  %-16s %s msgs/s; medians: %s%s\n", side, spread(cs, func(c cost) float64 { return c.rate() }, "%.0f"), medianCost(cs), cs[0].entries())
	}
	if rv := results["river"]; len(rv) > 0 {
		for _, side := range sides {
			if side == "river" {
				continue
			}
			cs := results[side]
			ratios := make([]float64, len(cs))
			for i := range cs {
				ratios[i] = cs[i].rate() / rv[i].rate()
			}
			fmt.Printf("  %s / river, per round: %s (ratio of medians %.2fx)\n", side, spreadOf(ratios, "%.2fx"),
				median(mapOf(cs, cost.rate))/median(mapOf(rv, cost.rate)))
		}
	}
}

// medianCost renders the median of each per-message figure.
func medianCost(cs []cost) string {
	pg := "n/a"
	if cs[0].pgCPU >= 0 {
		pg = fmt.Sprintf("%.1f", median(mapOf(cs, func(c cost) float64 { return c.per(float64(c.pgCPU.Microseconds())) })))
	}
	return fmt.Sprintf("%.3f stmts/msg, %.0f WAL B/msg, Postgres CPU %s µs/msg, process CPU %.1f µs/msg",
		median(mapOf(cs, func(c cost) float64 { return c.per(float64(c.stmts)) })),
		median(mapOf(cs, func(c cost) float64 { return c.per(float64(c.wal)) })),
		pg,
		median(mapOf(cs, func(c cost) float64 { return c.per(float64(c.proc.Microseconds())) })))
}

func mapOf(cs []cost, f func(cost) float64) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return out
}

func spread(cs []cost, f func(cost) float64, format string) string {
	return spreadOf(mapOf(cs, f), format)
}

// spreadOf renders min / median / max of vs.
func spreadOf(vs []float64, format string) string {
	s := slices.Clone(vs)
	slices.Sort(s)
	return fmt.Sprintf(format+" / "+format+" / "+format, s[0], median(s), s[len(s)-1])
}

// median returns the median of vs (the mean of the middle two for an even count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// loadAvg returns the machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}
