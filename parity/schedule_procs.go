package parity

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// This file is the world of the schedule tick properties (schedule_ticks.go,
// schedule_clock.go): simulated app processes, each a node running the schedules with its own
// outbox store and backend client, that can die at a chosen moment of a tick, and a log of
// every successful publish of every process.

// tickLog counts the successful publishes of each message id, through every client of a
// property (the nodes' buffers, the stores' after-commit publishers, the sweep), with the
// batch id each publish carried and the client that made it.
//
// A tick is claimed once (its claim is a row of the outbox's ticks table) and its messages
// are staged in the claim's transaction as one outbox row: one stored batch, with one batch
// id. The outbox publishes a row at least once: a publish that outlived its budget (abandoned,
// then landed) or a delete lost after the publish leaves the row for the sweep, which
// publishes the same batch again. Those are duplicate deliveries of one stored batch, which
// at-least-once allows. A tick claimed or staged twice would be two batches with two batch
// ids: that is what "published once" forbids (see checkOnce).
type tickLog struct {
	mu   sync.Mutex
	seen map[string]int
	// batches is, by message id, the batch ids it was published in and by whom.
	batches map[string]map[string][]string
}

func newTickLog() *tickLog {
	return &tickLog{seen: map[string]int{}, batches: map[string]map[string][]string{}}
}

func (l *tickLog) add(b core.OutgoingBatch, by string) {
	e, err := envelope.Decode(b.Body)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range e.MessageIDs {
		l.seen[id]++
		if l.batches[id] == nil {
			l.batches[id] = map[string][]string{}
		}
		l.batches[id][e.ID] = append(l.batches[id][e.ID], by)
	}
}

func (l *tickLog) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[id]
}

// stored returns the distinct batch ids message id was published in, each with the clients
// that published it.
func (l *tickLog) stored(id string) map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for b, by := range l.batches[id] {
		out[b] = append([]string(nil), by...)
	}
	return out
}

// ticks returns the published ticks of schedule (Unix seconds, from the message ids
// "<schedule>@<tick>") with their publish counts.
func (l *tickLog) ticks(schedule string) map[int64]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int64]int{}
	for id, n := range l.seen {
		rest, ok := strings.CutPrefix(id, schedule+"@")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(rest, 10, 64); err == nil {
			out[v] += n
		}
	}
	return out
}

// tickClient is the backend client of one simulated process: it logs every successful
// publish, and fails every publish once its process is dead.
type tickClient struct {
	core.Backend
	log  *tickLog
	dead *atomic.Bool // nil: never dies
	name string       // who publishes, in the log: "sweeper", "process 2"
}

func (c *tickClient) Unwrap() core.Backend { return c.Backend }

func (c *tickClient) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if c.dead != nil && c.dead.Load() {
		return fmt.Errorf("parity: the publishing process died: %w", core.ErrBackendUnavailable)
	}
	err := c.Backend.Publish(ctx, b)
	if err == nil {
		c.log.add(b, c.name)
	}
	return err
}

// tickWindow is the moment of a tick at which a process dies.
type tickWindow int32

const (
	noCrash tickWindow = iota
	// crashBeforeClaim: the process dies as it starts claiming the tick: no claim.
	crashBeforeClaim
	// crashAfterClaim: the process dies once the tick's claim and messages are in the claim's
	// transaction: the transaction commits (COMMIT reached the database), and nothing the
	// process would do after it (publish, hand off) happens.
	crashAfterClaim
	// crashAfterPublish: the process dies once the tick's messages were published.
	crashAfterPublish
)

func (w tickWindow) String() string {
	return [...]string{"no crash", "before claim", "after claim before publish", "after publish"}[w]
}

// tickWorld makes the simulated processes of one property, all on one outbox schema, and the
// sweeper process that publishes what dead processes left in the outbox.
type tickWorld struct {
	x       *X
	log     *tickLog
	raw     core.Backend // the one client every process wraps (a client per process would hold a connection pool each on SQL jobs)
	sweeper *outbox.Store
	pool    *pgxpool.Pool // PostgreSQL's (nil with Options.AppDB)
	clock   txmq.Clock    // nil: the system clock

	mu    sync.Mutex
	procs []*tickProc // every process started, in order
}

// now reads the processes' clock.
func (w *tickWorld) now() time.Time {
	if w.clock != nil {
		return w.clock.Now()
	}
	return time.Now()
}

// newTickWorld opens the outbox schema with its sweeper process, started (relay and a quick
// recovery sweep: rows left by a dead process are published within about a second).
func newTickWorld(x *X) *tickWorld {
	w := &tickWorld{x: x, log: newTickLog(), raw: x.rawClient()}
	w.sweeper = x.store(&tickClient{Backend: w.raw, log: w.log, name: "sweeper"}, outbox.Options{RecoveryAge: 500 * time.Millisecond, SweepInterval: 200 * time.Millisecond})
	x.needControl(w.sweeper.Ticks() == nil, "Store.Ticks (the schedule ticks)")
	if err := w.sweeper.Start(x.ctx()); err != nil {
		x.T.Fatalf("Store.Start: %v", err)
	}
	if x.appDB() == nil {
		w.pool = x.postgresPool()
	}
	return w
}

// tickProc is one simulated app process: a node running the registry's schedules, with its
// own outbox store (Ticks and Handoff, and its after-commit publishers) and backend client
// (a wrapper of the world's client that dies with the process).
// crash kills all of it at once, as a process dies: the client and the hand-off fail from
// then on, and the node halts (its buffer is lost).
type tickProc struct {
	node    *txmq.Node
	store   *outbox.Store
	log     *tickLog
	dead    atomic.Bool
	armed   atomic.Int32 // the tickWindow of the next claim in which the process dies
	once    sync.Once
	crashed chan struct{} // closed once the node has halted
	slow    atomic.Int64  // how long each claim waits before it reaches the store (a loaded machine)

	// begin and up are the clock before the node was made and after its Start returned: its
	// schedules' instants run from between them.
	begin, up time.Time
	callsMu   sync.Mutex
	calls     map[string][]*tickCall // each schedule's ClaimTick calls, in order
}

// tickCall is one ClaimTick call of a process.
type tickCall struct {
	tick int64 // Unix seconds
	done bool  // it returned
	err  error // what it returned
}

// called records the start of a ClaimTick call and returns it, for its end.
func (p *tickProc) called(schedule string, tick time.Time) *tickCall {
	c := &tickCall{tick: tick.Unix()}
	p.callsMu.Lock()
	defer p.callsMu.Unlock()
	p.calls[schedule] = append(p.calls[schedule], c)
	return c
}

// returned records the end of call c.
func (p *tickProc) returned(c *tickCall, err error) {
	p.callsMu.Lock()
	defer p.callsMu.Unlock()
	c.done, c.err = true, err
}

// callsOf returns a copy of the ClaimTick calls of schedule.
func (p *tickProc) callsOf(schedule string) []tickCall {
	p.callsMu.Lock()
	defer p.callsMu.Unlock()
	out := make([]tickCall, len(p.calls[schedule]))
	for i, c := range p.calls[schedule] {
		out[i] = *c
	}
	return out
}

// start starts a new process.
func (w *tickWorld) start() *tickProc {
	x := w.x
	x.T.Helper()
	p := &tickProc{log: w.log, crashed: make(chan struct{}), calls: map[string][]*tickCall{}}
	w.mu.Lock()
	name := fmt.Sprintf("process %d", len(w.procs))
	w.mu.Unlock()
	client := &tickClient{Backend: w.raw, log: w.log, dead: &p.dead, name: name}
	o := outbox.Options{Schema: w.sweeper.Schema(), Backend: client, RecoveryAge: 2 * time.Second, Logger: x.logger}
	p.store = w.procStore(o)
	p.begin = w.now()
	p.node = x.nodeOn(client, txmq.NodeOptions{Ticks: crashClaimer{p}, Handoff: procHandoff{p}, Clock: w.clock})
	p.up = w.now()
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	return p
}

// procStore opens a process's store on the sweeper's schema (another database's through
// Options.AppDB, which closes it at the property's end).
func (w *tickWorld) procStore(o outbox.Options) *outbox.Store {
	x := w.x
	x.T.Helper()
	if db := x.appDB(); db != nil {
		return x.storeOn(db, o.Backend, o, w.sweeper)
	}
	s, err := outbox.New(w.pool, &o)
	if err != nil {
		x.T.Fatalf("outbox.New: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// arm makes the process die in window w of its next claimed tick.
func (p *tickProc) arm(w tickWindow) { p.armed.Store(int32(w)) }

// crash kills the process (once): nothing it does from now on reaches the backend or the
// outbox, and its node halts in the background (Halt waits for the schedule loop, which may
// be the caller).
func (p *tickProc) crash() {
	p.once.Do(func() {
		p.dead.Store(true)
		go func() {
			txmqtest.Halt(p.node)
			close(p.crashed)
		}()
	})
}

// waitCrashed waits until p has died (and its node halted).
func (p *tickProc) waitCrashed(x *X, what string) {
	x.T.Helper()
	select {
	case <-p.crashed:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("the process did not die %s within %v (no claim reached the armed window)", what, x.Caps.Timeout)
	}
}

// kill kills the process at once and waits for it.
func (p *tickProc) kill(x *X) {
	x.T.Helper()
	p.crash()
	p.waitCrashed(x, "when killed")
}

// procHandoff is a process's hand-off to its outbox store: gone with the process.
type procHandoff struct{ p *tickProc }

func (h procHandoff) Handoff(ctx context.Context, batches []core.OutgoingBatch) error {
	if h.p.dead.Load() {
		return fmt.Errorf("parity: the process died: %w", core.ErrBackendUnavailable)
	}
	return h.p.store.Handoff(ctx, batches)
}

// crashClaimer is a process's TickClaimer: its store's, dying in the armed window.
type crashClaimer struct{ p *tickProc }

func (c crashClaimer) LastTick(ctx context.Context, schedule string) (time.Time, error) {
	return c.p.store.Ticks().LastTick(ctx, schedule)
}

func (c crashClaimer) ClaimTick(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (ok bool, err error) {
	call := c.p.called(schedule, tick)
	defer func() { c.p.returned(call, err) }()
	if d := time.Duration(c.p.slow.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
	return c.claim(ctx, schedule, queue, tick, next, publish)
}

// claim is ClaimTick once the call is recorded.
func (c crashClaimer) claim(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error) {
	p := c.p
	w := tickWindow(p.armed.Swap(int32(noCrash)))
	switch w {
	case crashBeforeClaim:
		p.crash()
		<-ctx.Done() // the node's stop
		return false, ctx.Err()
	case crashAfterClaim:
		ran := false
		ok, err := p.store.Ticks().ClaimTick(ctx, schedule, queue, tick, next, func(ctx context.Context) error {
			err := publish(ctx)
			ran = err == nil
			if ran {
				p.dead.Store(true) // dies now: only the COMMIT, already sent, still happens
			}
			return err
		})
		if !ran { // another process had the tick: die on a tick of our own
			p.arm(w)
			return ok, err
		}
		p.crash()
		return ok, err
	}
	ok, err := p.store.Ticks().ClaimTick(ctx, schedule, queue, tick, next, publish)
	if w == crashAfterPublish {
		if !ok || err != nil {
			p.arm(w)
			return ok, err
		}
		id := schedule + "@" + strconv.FormatInt(tick.Unix(), 10)
		for p.log.count(id) == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		p.crash()
	}
	return ok, err
}

// haltAll kills every process of ps at once and waits for them.
func haltAll(x *X, ps []*tickProc) {
	x.T.Helper()
	for _, p := range ps {
		p.crash()
	}
	for _, p := range ps {
		p.waitCrashed(x, "when killed")
	}
}

// drain waits until the sweeper published every outbox row left by the processes.
func (w *tickWorld) drain() {
	x := w.x
	x.T.Helper()
	x.eventually(func() bool { return outboxRows(x, w.sweeper) == 0 }, "the outbox rows of the ticks published")
	waitStoreIdle(x, w.sweeper)
}

// checkOnce fails the property for a published tick of schedule that is not an instant of its
// spec (isInstant) or was stored other than once, and returns the published ticks, sorted.
// Stored once means published in one batch (one batch id: one claim, one outbox row); the
// outbox may publish that batch more than once (at-least-once: see tickLog), which is logged,
// not failed.
func (w *tickWorld) checkOnce(schedule string, isInstant func(int64) bool) []int64 {
	x := w.x
	x.T.Helper()
	got := w.log.ticks(schedule)
	ticks := make([]int64, 0, len(got))
	for t, n := range got {
		ticks = append(ticks, t)
		id := schedule + "@" + strconv.FormatInt(t, 10)
		stored := w.log.stored(id)
		switch {
		case len(stored) != 1:
			x.T.Errorf("schedule %s: tick %s published %d times in %d batches (by batch id: %v), want one batch: a tick claimed or staged twice", schedule, fmtTick(t), n, len(stored), stored)
		case n != 1:
			x.T.Logf("schedule %s: tick %s published %d times, all of one stored batch (by batch id: %v): the outbox's at-least-once", schedule, fmtTick(t), n, stored)
		}
		if !isInstant(t) {
			x.T.Errorf("schedule %s: tick %s is not an instant of the schedule's spec (a tick chain anchored elsewhere, e.g. at a node's start)", schedule, fmtTick(t))
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	return ticks
}

// waitFrac sleeps until the wall clock's sub-second part is f seconds, so that a node starts
// at a moment not aligned to a second (and far from every tick of whole seconds).
func waitFrac(f float64) {
	d := time.Duration(f*float64(time.Second)) - time.Duration(time.Now().Nanosecond())
	if d < 0 {
		d += time.Second
	}
	time.Sleep(d)
}

func fmtTick(t int64) string {
	return fmt.Sprintf("%d (%s)", t, time.Unix(t, 0).UTC().Format("2006-01-02T15:04:05Z"))
}
