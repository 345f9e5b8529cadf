package parity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// The messages group: lookup by id through a batch's life, with the ledger (package ledger,
// in the suite's Postgres like the transactions group: these properties are skipped, never
// passed, when it does not answer) on every adapter, and without it the adapter's native
// lookup or a clear "unknown" error.

func init() {
	register("messages",
		property{name: "ledger_lookup_states_through_life", run: ledgerLifeStates},
		property{name: "ledger_ids_stable_across_dead_letter_replay", run: ledgerReplayIDs},
		property{name: "native_lookup_or_unknown_error", run: nativeLookup},
		property{name: "ledger_cancel_before_run_never_seen", dup: true, run: ledgerCancel},
	)
}

// ledger opens a Ledger in a fresh schema of the suite's database, closed in cleanup.
func (x *X) ledger() *ledger.Ledger { x.T.Helper(); return x.ledgerFlushing(20 * time.Millisecond) }

// ledgerFlushing is ledger with the given FlushInterval (a long one gathers a run's events,
// its publish's included, into one write).
func (x *X) ledgerFlushing(every time.Duration) *ledger.Ledger {
	x.T.Helper()
	pool := x.postgresPool()
	o := &ledger.Options{Schema: testenv.PostgresSchema(x.T, pool), FlushInterval: every, Logger: x.logger}
	if err := ledger.Migrate(x.ctx(), pool, o); err != nil {
		x.T.Fatalf("ledger.Migrate: %v", err)
	}
	l, err := ledger.New(pool, o)
	if err != nil {
		x.T.Fatalf("ledger.New: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l
}

// waitState waits until the Inspector reports id in state want and returns what it reported.
func waitState(x *X, in *txmq.Inspector, id string, want core.MessageState) core.MessageInfo {
	x.T.Helper()
	var (
		last    core.MessageInfo
		lastErr error
	)
	x.eventually(func() bool {
		last, lastErr = in.Get(context.Background(), id)
		return lastErr == nil && last.State == want
	}, func() string { // read at the failure: the last lookup, not the zero values before the first
		return fmt.Sprintf("message %q in state %s (last seen: %+v, error %v)", id, want, last, lastErr)
	})
	return last
}

// gate is a listener that, run after run, tells the test it started and waits for the test's
// verdict.
type gate struct {
	started chan []string // the run's MessageIDs
	verdict chan error
}

func newGate() *gate { return &gate{started: make(chan []string, 8), verdict: make(chan error, 8)} }

func (g *gate) listen(ctx context.Context, _ []Msg) error {
	g.started <- txmq.MessageIDs(ctx)
	select {
	case err := <-g.verdict:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ledgerLifeStates: with a ledger, Get reports a message delayed after its publish, running
// (this node, run 1) while its listener runs, waiting to retry (runs 1, the error, the next
// run) after a failed run, running again (run 2) and completed (runs 2); a batch failing every
// run is dead-lettered (reason delivery_exhausted). The listener sees the given id in every
// run, and List selects by queue, state and publish time.
func ledgerLifeStates(x *X) {
	lg := x.ledger()
	qOK := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3})
	qBad := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 2})
	// The property must see the message delayed before it is due and waiting to retry before
	// its next run: windows a loaded machine makes longer (x.window). The node's lease is
	// long (steadyLease): a lost lease would run the gated listener again and shift the runs.
	retryWait := x.window(3 * time.Second)
	o := x.steadyLease()
	o.Ledger, o.Backoff = lg, func(int) time.Duration { return retryWait }
	n := x.node(o)
	in := n.Inspector()
	g := newGate()
	if err := qOK.Listen(n, g.listen); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	var (
		mu     sync.Mutex
		badIDs [][]string
	)
	if err := qBad.Listen(n, func(ctx context.Context, _ []Msg) error {
		mu.Lock()
		badIDs = append(badIDs, txmq.MessageIDs(ctx))
		mu.Unlock()
		return errors.New("parity: always fails")
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	before := time.Now()
	okID, badID := "life-ok/"+qOK.Name(), "life-bad/"+qBad.Name()
	delay := x.window(4 * time.Second)
	if err := qOK.Publish(context.Background(), n, Msg{K: "ok"}, txmq.ID(okID), txmq.After(delay)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	m := waitState(x, in, okID, core.StateDelayed)
	if m.Queue != qOK.Name() || m.Due.Before(before.Add(delay-time.Second)) {
		x.T.Errorf("delayed message: %+v; want queue %s and a due time about %v after the publish", m, qOK.Name(), delay)
	}
	select {
	case <-g.started:
		x.T.Fatalf("the listener ran before Get reported the message delayed")
	default:
	}
	checkRun := func(run int) {
		select {
		case ids := <-g.started:
			if !slices.Equal(ids, []string{okID}) {
				x.T.Errorf("run %d: MessageIDs %q, want [%q]", run, ids, okID)
			}
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("run %d never started", run)
		}
		m := waitState(x, in, okID, core.StateRunning)
		if m.Node != n.ID() || m.Runs != run || m.BatchID == "" {
			x.T.Errorf("running message: %+v; want node %s, run %d and a batch id", m, n.ID(), run)
		}
	}
	checkRun(1)
	g.verdict <- errors.New("parity: run 1 fails on purpose")
	m = waitState(x, in, okID, core.StateRetry)
	if m.Runs != 1 || !strings.Contains(m.Error, "run 1 fails on purpose") || !m.Due.After(m.UpdatedAt) {
		x.T.Errorf("message waiting to retry: %+v; want runs 1, the run's error and a next run after the failure", m)
	}
	checkRun(2)
	g.verdict <- nil
	m = waitState(x, in, okID, core.StateCompleted)
	if m.Runs != 2 {
		x.T.Errorf("completed message: %+v; want runs 2", m)
	}

	if err := qBad.Publish(context.Background(), n, Msg{K: "bad"}, txmq.ID(badID)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	m = waitState(x, in, badID, core.StateDead)
	if m.Reason != core.ReasonDeliveryExhausted || m.Runs != 2 || !strings.Contains(m.Error, "always fails") {
		x.T.Errorf("dead-lettered message: %+v; want reason %s, runs 2 and the last error", m, core.ReasonDeliveryExhausted)
	}
	mu.Lock()
	for i, ids := range badIDs {
		if !slices.Equal(ids, []string{badID}) {
			x.T.Errorf("failing batch, run %d: MessageIDs %q, want [%q]", i+1, ids, badID)
		}
	}
	mu.Unlock()

	list := func(f core.MessageFilter) []string {
		ms, err := in.List(context.Background(), f)
		if err != nil {
			x.T.Fatalf("List(%+v): %v", f, err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	for _, c := range []struct {
		f    core.MessageFilter
		want []string
	}{
		{core.MessageFilter{Queue: qOK.Name()}, []string{okID}},
		{core.MessageFilter{Queue: qOK.Name(), State: core.StateCompleted}, []string{okID}},
		{core.MessageFilter{Queue: qOK.Name(), State: core.StateDead}, nil},
		{core.MessageFilter{Queue: qBad.Name(), State: core.StateDead, Since: before}, []string{badID}},
		{core.MessageFilter{Queue: qBad.Name(), Until: before}, nil},
	} {
		if got := list(c.f); !slices.Equal(got, c.want) {
			x.T.Errorf("List(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}

// ledgerReplayIDs: a dead-lettered batch replayed from the dead-letter store reaches the
// listener with the same message ids, and the ledger follows it from dead to completed.
func ledgerReplayIDs(x *X) {
	lg := x.ledger()
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	n := x.node(txmq.NodeOptions{Ledger: lg, DeadLetters: s})
	in := n.Inspector()
	var (
		mu      sync.Mutex
		failing = true
		seen    [][]string
	)
	if err := q.Listen(n, func(ctx context.Context, _ []Msg) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, txmq.MessageIDs(ctx))
		if failing {
			return errors.New("parity: fails until replayed")
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	ids := []string{"replay-a/" + q.Name(), "replay-b/" + q.Name()}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "a"}, {K: "b"}}, txmq.IDs(ids...)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	for _, id := range ids {
		waitState(x, in, id, core.StateDead)
	}
	dls, err := s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: q.Name()})
	if err != nil || len(dls) == 0 {
		x.T.Fatalf("ListDeadLetters: %d rows, %v; want the dead letter", len(dls), err)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	for _, d := range dls {
		if err := s.Replay(x.ctx(), d.ID); err != nil {
			x.T.Fatalf("Replay: %v", err)
		}
	}
	for _, id := range ids {
		waitState(x, in, id, core.StateCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, run := range seen {
		got = append(got, run...)
	}
	for _, id := range got {
		if !slices.Contains(ids, id) {
			x.T.Errorf("a run saw message id %q; the batch's ids are %q (before and after the replay)", id, ids)
		}
	}
	if len(seen) < 2 {
		x.T.Errorf("the listener ran %d times; want the failing run and the replayed one", len(seen))
	}
}

// nativeLookup: without a ledger, the Inspector either finds a stored message through the
// adapter's core.BatchInspector (state delayed, its queue and batch) and, with
// core.BatchEditor, cancels it so no listener sees it; or fails with an error wrapping
// ErrLookupUnsupported that names the backend.
func nativeLookup(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	be := x.rawClient()
	n := x.nodeOn(be, txmq.NodeOptions{})
	in := n.Inspector()
	rec := newRecorder()
	listen(x, rec, q, n, nil)
	id := "native/" + q.Name()
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "cancelled"}, {K: "kept"}}, txmq.IDs(id, id+"/kept"), txmq.After(3*time.Second)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	if _, ok := be.(core.BatchInspector); !ok {
		_, err := in.Get(context.Background(), id)
		if !errors.Is(err, txmq.ErrLookupUnsupported) || !strings.Contains(err.Error(), "backend") {
			x.T.Fatalf("Get without a ledger on a backend without native lookup: %v; want an error wrapping ErrLookupUnsupported naming the backend", err)
		}
		if _, err := in.Cancel(context.Background(), id); !errors.Is(err, txmq.ErrLookupUnsupported) {
			x.T.Fatalf("Cancel without a ledger on a backend without native lookup: %v; want ErrLookupUnsupported", err)
		}
		return
	}
	m := waitState(x, in, id, core.StateDelayed)
	if m.Queue != q.Name() || m.BatchID == "" {
		x.T.Errorf("native lookup: %+v; want queue %s and a batch id", m, q.Name())
	}
	if _, ok := be.(core.BatchEditor); !ok {
		return
	}
	if _, err := in.Cancel(context.Background(), id); err != nil {
		x.T.Fatalf("Cancel: %v", err)
	}
	waitDelivered(x, rec, []string{"kept"})
	x.idle(n)
	if rec.Count("cancelled") != 0 {
		x.T.Errorf("the listener saw a message cancelled before its run")
	}
}

// ledgerCancel: with a ledger, on every backend, a message cancelled before its batch runs never
// reaches the listener: one message of a batch (the rest of the batch is delivered) and the
// only message of another (the batch is acked without a run). Cancelling a completed message
// is refused with ErrNotCancellable.
func ledgerCancel(x *X) {
	lg := x.ledger()
	q := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{Ledger: lg})
	in := n.Inspector()
	rec := newRecorder()
	listen(x, rec, q, n, nil)
	delay := 3 * time.Second
	pre := "cancel/" + q.Name() + "/"
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "kept"}, {K: "cancelled-in-batch"}}, txmq.IDs(pre+"kept", pre+"in-batch"), txmq.After(delay)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "cancelled-alone"}, txmq.ID(pre+"alone"), txmq.After(delay)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	published := time.Now()
	for _, id := range []string{pre + "in-batch", pre + "alone"} {
		waitState(x, in, id, core.StateDelayed)
		m, err := in.Cancel(context.Background(), id)
		if err != nil || m.State != core.StateCancelled {
			x.T.Fatalf("Cancel(%s) = %+v, %v; want it cancelled", id, m, err)
		}
	}
	if rec.Total() > 0 {
		x.T.Fatalf("a delayed message reached the listener before its due time")
	}
	waitDelivered(x, rec, []string{"kept"})
	waitState(x, in, pre+"kept", core.StateCompleted)
	// Past the due time and the tolerance, with the node idle, the cancelled batch had its turn.
	time.Sleep(time.Until(published.Add(delay + x.Caps.DueTolerance)))
	x.idle(n)
	for _, k := range []string{"cancelled-in-batch", "cancelled-alone"} {
		if rec.Has(k) {
			x.T.Errorf("the listener received %s, cancelled before its batch ran", k)
		}
	}
	for _, id := range []string{pre + "in-batch", pre + "alone"} {
		if m, err := in.Get(context.Background(), id); err != nil || m.State != core.StateCancelled {
			x.T.Errorf("Get(%s) after its batch's turn = %+v, %v; want cancelled", id, m, err)
		}
	}
	if _, err := in.Cancel(context.Background(), pre+"kept"); !errors.Is(err, txmq.ErrNotCancellable) {
		x.T.Errorf("Cancel of a completed message: %v; want ErrNotCancellable", err)
	}
}
