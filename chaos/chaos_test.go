package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// Timings of every scenario. The lease is short so that faults longer than it happen within
// seconds; the publisher runs long enough for the faults to land while it publishes, and
// stops publishAfter the last fault ended (or after steps groups, whichever comes first), so
// that every scenario commits messages before, during and after its faults.
const (
	lease        = 2 * time.Second
	workers      = 3
	steps        = 400                   // publisher groups of 5 messages: at most 2,000 messages
	stepEvery    = 25 * time.Millisecond // at most about 10 s of publishing
	faultAt      = 2 * time.Second       // after the publisher is ready
	publishAfter = 3 * time.Second       // publishing goes on this long after the faults ended
	pauseFor     = 5 * time.Second       // longer than the lease
	downFor      = time.Second           // a crashed backend stays down this long
	cutFor       = 3 * time.Second
	killEvery    = 2500 * time.Millisecond
	slowLead     = time.Second      // Exclusive runs turn slow this long before a backend fault
	deliverAfter = 45 * time.Second // the longest wait for the last deliveries once publishing ended
	lossyAfter   = 15 * time.Second // the same for a scenario that loses data by nature
	// lossyQuiet ends that wait sooner, once nothing new was delivered for this long (more
	// than two leases: a batch whose lease ran out has come back by then); what is still
	// missing then was lost.
	lossyQuiet = 5 * time.Second
	// ledgerHorizon is ledger mode's horizon in the scenario that runs it: a few leases, so
	// that what the backend forgot comes back within seconds.
	ledgerHorizon = 3 * lease
)

// scenario is one fault kind on one backend.
type scenario struct {
	name string
	// lossy, when set, says why this backend loses acknowledged data by its nature under this
	// fault: its figures are printed but missing and overlaps do not fail the test.
	lossy string
	// settledAfter, when set on a lossy scenario, still fails the test when a message committed
	// more than this long after the last fault ended was never delivered: what the backend
	// loses by nature is lost during the fault, and the service must work again after it.
	settledAfter time.Duration
	// ledgerHorizon, when set, runs the app with ledger mode on (ledger.Options.Mode) with
	// this horizon: missing is asserted even on a backend that loses acknowledged data, and
	// overlaps are reported only (the ledger brings messages back, not a forgotten lease).
	ledgerHorizon time.Duration
	// inject runs the fault(s) and returns their windows. It runs on its own goroutine: it
	// reports problems as an error, never through t.
	inject func(r *rig) ([]fault, error)
}

// backendKind starts one backend server for a group of scenarios and names the URL a
// scenario uses (uniq keeps scenarios apart on one server).
type backendKind struct {
	name string // the group's subtest
	// backend names the backend in the figure lines ("chaos[redis/...]"); empty means name.
	backend   string
	scenarios func(t *testing.T) []scenarioRun
}

// scenarioRun is a scenario bound to its server and backend URL.
type scenarioRun struct {
	scenario
	srv *service
	url func(uniq string) string
}

// appDB is the app database every scenario's publisher and workers use (outbox, dead letters,
// ground truth), a throwaway cluster the processes reach through a proxy per scenario.
type appDB struct {
	url  string // direct, for the checker
	pool *pgxpool.Pool
}

// rig is one running scenario: its processes and its proxy in front of the app database.
type rig struct {
	t       *testing.T
	dir     string
	env     []string
	srv     *service
	proxy   *testenv.Proxy
	mu      sync.Mutex
	workers []*proc
	incs    []int
	exited  map[string]time.Time // worker incarnation -> exit (or kill) time
}

// groupsAtOnce is how many groups of scenarios (one backend server each) run at once by
// default (TXMQ_CHAOS_PARALLEL overrides it). A scenario mostly waits (for its publisher's
// pace, its faults and its deliveries: about a fifth of a core each on a 2-core machine
// under -race), so five at a time keep such a machine about half busy.
const groupsAtOnce = 5

// TestChaos runs every scenario on every backend and prints one figure line each (see the
// package doc). Each group of scenarios has a backend server of its own, and the groups run
// side by side, up to groupsAtOnce (TXMQ_CHAOS_PARALLEL) at once, longest first; a group's
// scenarios run one after another, since they fault the same server. The groups are started
// from goroutines as ordinary subtests rather than with t.Parallel, which -parallel
// (GOMAXPROCS by default, 2 on a small CI machine) would bound.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: starts servers and processes for minutes; run without -short")
	}
	app := startAppDB(t)
	atOnce := groupsAtOnce
	if v := os.Getenv("TXMQ_CHAOS_PARALLEL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TXMQ_CHAOS_PARALLEL=%q: want a number of groups, at least 1", v)
		}
		atOnce = n
	}
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for _, b := range []backendKind{
		{name: "redis", scenarios: redisScenarios},
		{name: "sqljobs", scenarios: sqljobsScenarios},
		{name: "nats", scenarios: natsScenarios},
		{name: "redis-noaof", backend: "redis", scenarios: redisNoAOFScenarios},
		{name: "nats-cluster", scenarios: natsClusterScenarios},
		{name: "nats-nosync", backend: "nats", scenarios: natsNoSyncScenarios},
		{name: "redis-cluster", scenarios: redisClusterScenarios},
	} {
		backend := cmp.Or(b.backend, b.name)
		sem <- struct{}{} // here, not in the goroutine: the groups start in this order
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(b.name, func(t *testing.T) {
				for _, sc := range b.scenarios(t) {
					t.Run(sc.name, func(t *testing.T) { runScenario(t, backend, app, sc) })
				}
			})
		})
	}
	wg.Wait()
}

func startAppDB(t *testing.T) *appDB {
	t.Helper()
	_, u := startPostgres(t, "app-postgres")
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &appDB{url: u, pool: pool}
}

// The faults every backend gets.
func commonScenarios(srv *service, u func(string) string) []scenarioRun {
	return []scenarioRun{
		{scenario{name: "kill-workers", inject: killWorkers}, srv, u},
		{scenario{name: "pause-backend", inject: pauseBackend}, srv, u},
		{scenario{name: "restart-backend", inject: restartBackend}, srv, u},
		{scenario{name: "cut-appdb", inject: cutAppDB}, srv, u},
	}
}

func sqljobsScenarios(t *testing.T) []scenarioRun {
	srv, u := startPostgres(t, "jobs-postgres")
	return commonScenarios(srv, func(uniq string) string { return withParam(u, "txmq_schema", uniq) })
}

func redisScenarios(t *testing.T) []scenarioRun {
	srv, u := startRedis(t, "redis-aof", true)
	return commonScenarios(srv, func(uniq string) string { return withParam(u, "txmq_prefix", uniq) })
}

// redisNoAOFScenarios restart a Redis without an append-only file: a group of its own, on
// its own server, beside the other groups.
func redisNoAOFScenarios(t *testing.T) []scenarioRun {
	noAOF, nu := startRedis(t, "redis-noaof", false)
	noAOFURL := func(uniq string) string { return withParam(nu, "txmq_prefix", uniq) }
	return []scenarioRun{{scenario{
		name:   "restart-backend-noaof",
		lossy:  "Redis without an append-only file forgets everything on a restart: run it with appendonly yes, appendfsync always",
		inject: restartBackend,
	}, noAOF, noAOFURL}, scenarioRun{scenario{
		name:          "restart-backend-noaof-ledger",
		ledgerHorizon: ledgerHorizon,
		inject:        restartBackend,
	}, noAOF, noAOFURL}}
}

func natsScenarios(t *testing.T) []scenarioRun {
	srv, u := startNATS(t, "nats", true)
	return commonScenarios(srv, func(uniq string) string { return withParam(u, "txmq_prefix", uniq) })
}

// natsNoSyncScenarios restart a lazily syncing nats-server: a group of its own, on its own
// server, beside the other groups.
func natsNoSyncScenarios(t *testing.T) []scenarioRun {
	lazy, lu := startNATS(t, "nats-nosync", false)
	lazyURL := func(uniq string) string { return withParam(lu, "txmq_prefix", uniq) }
	return []scenarioRun{{scenario{
		name:   "restart-backend-nosync",
		lossy:  "JetStream acknowledges writes before it fsyncs them (sync_interval 2 min by default): run it with sync_interval: always",
		inject: restartBackend,
	}, lazy, lazyURL}, scenarioRun{scenario{
		// The same kill -9 and restart of the lazily syncing server, with ledger mode on:
		// what the server forgot comes back from the app database.
		name:          "restart-backend-nosync-ledger",
		ledgerHorizon: ledgerHorizon,
		inject:        restartBackend,
	}, lazy, lazyURL}}
}

func withParam(raw, key, value string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + key + "=" + url.QueryEscape(value)
}

// runScenario starts the workers and the publisher, injects the fault while the publisher
// publishes, waits for every committed message to be delivered (or the deadline), stops
// everything and checks the figures.
func runScenario(t *testing.T, backend string, app *appDB, sc scenarioRun) {
	name := backend + "/" + sc.name
	uniq := testenv.UniqueName("chaos_")
	proxy := testenv.NewProxy(t, hostPort(t, app.url))
	dbURL := strings.Replace(app.url, hostPort(t, app.url), proxy.Addr(), 1)
	dir := t.TempDir()
	if keep := os.Getenv("TXMQ_CHAOS_KEEP"); keep != "" {
		// The delivery logs, kept for a closer look: TXMQ_CHAOS_KEEP=/some/dir.
		dir = filepath.Join(keep, strings.ReplaceAll(name, "/", "-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{
		t: t, dir: dir, srv: sc.srv, proxy: proxy,
		exited: map[string]time.Time{},
		env: []string{
			"CHAOS_BACKEND=" + sc.url(uniq), "CHAOS_DATABASE_URL=" + dbURL, "CHAOS_SCHEMA=" + uniq,
			"CHAOS_LEASE=" + lease.String(), "CHAOS_DIR=" + dir,
		},
	}
	if sc.ledgerHorizon > 0 {
		r.env = append(r.env, "CHAOS_LEDGER_HORIZON="+sc.ledgerHorizon.String())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = app.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+uniq+" CASCADE")
	})
	r.workers, r.incs = make([]*proc, workers), make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { errs[i] = r.startWorker(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pub := mustStart(t, procSpec{name: "publisher", path: os.Args[0], args: []string{"-test.run=^$"},
		env: append([]string{roleEnv + "=publisher", fmt.Sprintf("CHAOS_STEPS=%d", steps), "CHAOS_EVERY=" + stepEvery.String()}, r.env...)})

	type injected struct {
		faults []fault
		err    error
	}
	faultsDone := make(chan injected, 1)
	go func() {
		time.Sleep(faultAt)
		f, err := sc.inject(r)
		// The publisher stops at the marker (or after its steps, if that comes first).
		time.AfterFunc(publishAfter, func() { _ = os.WriteFile(filepath.Join(dir, stopMarker), nil, 0o644) })
		faultsDone <- injected{f, err}
	}()
	var pubTimeout bool
	select {
	case <-pub.done:
	case <-time.After(3 * time.Minute):
		pubTimeout = true
	}
	inj := <-faultsDone
	if inj.err != nil {
		t.Fatalf("chaos[%s]: injecting the fault: %v", name, inj.err)
	}
	if pubTimeout {
		t.Fatalf("chaos[%s]: the publisher did not finish in 3m", name)
	}
	faults := inj.faults
	if err := pub.exitErr(); err != nil {
		t.Fatalf("chaos[%s]: publisher: %v\n%s", name, err, pub.tail(4096))
	}
	t.Logf("chaos[%s]: publisher %s; %s", name, pub.line("done"), pub.line("drops"))

	ctx := context.Background()
	committed, err := committedRows(ctx, app.pool, uniq)
	if err != nil {
		t.Fatal(err)
	}
	wait := deliverAfter
	if sc.lossy != "" {
		wait = lossyAfter
	}
	deadline := time.Now().Add(wait)
	lastMissing, changed := -1, time.Now()
	for {
		runs, err := readRuns(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		f := compute(committed, runs, faults, exclQueue.Name(), nil)
		if f.missing != lastMissing {
			lastMissing, changed = f.missing, time.Now()
		}
		if f.missing == 0 || time.Now().After(deadline) || (sc.lossy != "" && time.Since(changed) > lossyQuiet) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(lease) // let redeliveries in flight land: they count as duplicates
	r.mu.Lock()
	var stopping sync.WaitGroup
	for i, w := range r.workers { // side by side: each drains its runs and closes
		stopping.Go(func() {
			if !w.stop(syscall.SIGTERM, 40*time.Second) {
				t.Errorf("chaos[%s]: worker %d did not stop within 40s of SIGTERM", name, i)
			}
		})
	}
	stopping.Wait()
	for i, w := range r.workers {
		r.exited[r.incName(i)] = w.exitedAt()
		t.Logf("chaos[%s]: %s %s", name, r.incName(i), w.line("drops"))
	}
	r.mu.Unlock()

	runs, err := readRuns(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	f := compute(committed, runs, faults, exclQueue.Name(), r.exited)
	line := f.line(name)
	if sc.lossy != "" {
		line += " (lossy by nature, not asserted)"
	}
	if sc.ledgerHorizon > 0 {
		line += fmt.Sprintf(" (ledger mode, horizon %v; overlaps not asserted)", sc.ledgerHorizon)
	}
	report(t, line)
	perInc := map[string]int{}
	for _, r := range runs {
		perInc[r.inc]++
	}
	t.Logf("chaos[%s]: %d listener runs (per worker incarnation %v), %d interrupted by a kill", name, len(runs), perInc, f.interrupted)
	for _, fl := range faults {
		t.Logf("chaos[%s]: fault %s..%s", name, fl.start.Format("15:04:05.000"), fl.end.Format("15:04:05.000"))
	}
	for _, o := range f.overlapping {
		t.Logf("chaos[%s]: exclusive overlap: %s", name, o)
	}
	if f.phantom != 0 {
		t.Errorf("chaos[%s]: %d messages delivered that were never committed", name, f.phantom)
	}
	if sc.lossy != "" {
		t.Logf("chaos[%s]: %s", name, sc.lossy)
		if sc.settledAfter > 0 && len(faults) > 0 {
			if late := missingAfter(committed, runs, faults[len(faults)-1].end.Add(sc.settledAfter)); len(late) > 0 {
				t.Errorf("chaos[%s]: %d messages committed more than %v after the fault ended were never delivered (for example %v): the backend did not work again after the fault",
					name, len(late), sc.settledAfter, late[:min(len(late), 5)])
			}
		}
		return
	}
	if f.missing != 0 {
		t.Errorf("chaos[%s]: %d committed messages never delivered (for example %v)", name, f.missing, f.missingKeys)
	}
	if f.overlaps != 0 && sc.ledgerHorizon == 0 {
		t.Errorf("chaos[%s]: %d runs of the Exclusive queue overlapped another run", name, f.overlaps)
	}
}

// missingAfter returns the keys committed after since that no successful run delivered.
func missingAfter(committed map[string]commit, runs []*runRec, since time.Time) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		if r.ok {
			for _, k := range r.keys {
				seen[k] = true
			}
		}
	}
	var out []string
	for k, c := range committed {
		if c.at.After(since) && !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// report prints the figure line on stdout and appends it to $TXMQ_CHAOS_SUMMARY.
func report(t *testing.T, line string) {
	fmt.Println(line)
	t.Log(line)
	if p := os.Getenv("TXMQ_CHAOS_SUMMARY"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Errorf("TXMQ_CHAOS_SUMMARY: %v", err)
			return
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Errorf("TXMQ_CHAOS_SUMMARY: %v", err)
		}
	}
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// incName names worker i's current incarnation (and its delivery log).
func (r *rig) incName(i int) string { return fmt.Sprintf("w%d.%d", i, r.incs[i]) }

// startWorker starts worker i's next incarnation. It may be called from any goroutine.
func (r *rig) startWorker(i int) error {
	r.mu.Lock()
	r.incs[i]++
	inc := r.incName(i)
	r.mu.Unlock()
	p, err := startProc(r.t, procSpec{name: "worker " + inc, path: os.Args[0], args: []string{"-test.run=^$"},
		env: append([]string{roleEnv + "=worker", "CHAOS_NAME=" + inc, "CHAOS_LOG=" + filepath.Join(r.dir, inc+".jsonl")}, r.env...)})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.workers[i] = p
	r.mu.Unlock()
	return nil
}

// killWorkers kills a worker with kill -9 every killEvery (each in turn) and starts it again.
func killWorkers(r *rig) ([]fault, error) {
	var faults []fault
	for i := range workers {
		if i > 0 {
			time.Sleep(killEvery)
		}
		r.mu.Lock()
		w, inc := r.workers[i], r.incName(i)
		r.mu.Unlock()
		start := time.Now()
		w.kill()
		r.mu.Lock()
		r.exited[inc] = w.exitedAt()
		r.mu.Unlock()
		faults = append(faults, fault{start: start, end: time.Now(), killed: []string{inc}})
		if err := r.startWorker(i); err != nil {
			return faults, err
		}
	}
	return faults, nil
}

// slowExclusive makes the workers' Exclusive runs long (see slowMarker) from a moment before
// a backend fault until its end, so that the fault finds one in flight. It returns the
// function that ends it.
func (r *rig) slowExclusive() (func(), error) {
	p := filepath.Join(r.dir, slowMarker)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return nil, err
	}
	time.Sleep(slowLead)
	return func() { _ = os.Remove(p) }, nil
}

// pauseBackend freezes the backend (SIGSTOP to every process of it) for longer than the
// lease, with an Exclusive run in flight, then thaws it.
func pauseBackend(r *rig) ([]fault, error) {
	done, err := r.slowExclusive()
	if err != nil {
		return nil, err
	}
	defer done()
	start := time.Now()
	r.srv.pause()
	time.Sleep(pauseFor)
	r.srv.resume()
	return []fault{{start: start, end: time.Now()}}, nil
}

// restartBackend kills the backend (kill -9 of every process of it), with an Exclusive run in
// flight, and starts it again on the same port and data directory.
func restartBackend(r *rig) ([]fault, error) {
	done, err := r.slowExclusive()
	if err != nil {
		return nil, err
	}
	defer done()
	start := time.Now()
	r.srv.crash()
	time.Sleep(downFor)
	err = r.srv.restart()
	return []fault{{start: start, end: time.Now()}}, err
}

// cutAppDB drops every connection to the app database and refuses new ones for a while.
func cutAppDB(r *rig) ([]fault, error) {
	start := time.Now()
	r.proxy.Break()
	time.Sleep(cutFor)
	r.proxy.Restore()
	return []fault{{start: start, end: time.Now()}}, nil
}
