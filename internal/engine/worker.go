package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// runner is the consume half's back: it runs claimed batches through the policy (decode,
// run, retry, dead letter, OnError) on its worker pool, and holds their leases: the fences
// (one timer per node), the extensions in flight, and the memory of batches it took down the
// terminal path. fences, terminals and each claim's running have their own locks; mu guards
// extendsDone. e is the engine, for the shared things.
type runner struct {
	e         *Engine
	pool      workerPool     // goroutines that run batches (see workerPool)
	workers   sync.WaitGroup // batches between dispatch and the end of their policy
	fences    fenceSet       // running claims by fence time, with the node's fence timer
	timeouts  timeoutSet     // timed runs by their next step, with the node's timeout timer
	terminals terminalMemory // batch ids this node dead-lettered
	margin    time.Duration  // LeaseMargin(opts.Lease)

	mu          sync.Mutex
	extending   sync.WaitGroup // lease extensions in flight
	extendsDone bool           // the lease loop ended: no more extensions (under mu)
	extendSem   chan struct{}  // bounds them

	runCtx    context.Context // done when listeners are cancelled (cancelRunning)
	runCancel context.CancelFunc
}

// init sets the runner up for e.
func (rn *runner) init(e *Engine) {
	rn.e = e
	rn.margin = core.LeaseMargin(e.opts.Lease)
	rn.extendSem = make(chan struct{}, extendConcurrency)
	rn.fences.fire = rn.fenceExpired
	rn.timeouts.fire = rn.timeoutExpired
	rn.runCtx, rn.runCancel = context.WithCancel(context.Background())
}

// admit counts a batch the driver took a slot for, before its worker starts (Close waits
// for every admitted batch).
func (rn *runner) admit() { rn.workers.Add(1) }

// wait waits until every admitted batch is done.
func (rn *runner) wait() { rn.workers.Wait() }

// start runs the policy on c, admitted, on a worker of the pool.
func (rn *runner) start(l *Listener, c *core.Claim) {
	rn.pool.runWork(rn.e.stopCtx.Done(), rn, l, c)
}

// running is one batch a worker holds, from decode to settle, shared with the lease loop and
// the node's fence timer (fenceSet).
type running struct {
	claim     *core.Claim
	ctx       listenerCtx      // the listener's context (cancel cancels it)
	ids       *envelope.IDList // the batch's message ids once decoded (MessageIDs)
	lost      atomic.Bool      // the lease was lost or fenced; written under fs.mu
	extending atomic.Bool      // an extension is in flight

	mu       sync.Mutex // serialises Extend with the settle of the same claim
	settled  bool
	call     callCtx // the first settle call's context (r.mu): no allocation of its own
	callUsed bool

	fs      *fenceSet  // the node's; fs.mu guards the fields below
	fenceAt time.Time  // confirmed lease end minus the margin, on this node's clock
	idx     int        // index in fs's heap; -1 once out of it (fenced or done)
	done    bool       // the worker is done with the claim
	ledger  *ledgerRun // the ledger's running event (nil before it, or without a ledger)

	// A timed run (Spec.RunTimeout) keeps what the hard step needs to end it without its
	// worker (timeouts.go; the ledger's ids are in ledger); timeouts.mu guards stepAt, tIdx
	// and step.
	listener *Listener
	batch    *Batch
	run      int
	gid      uint64    // the worker goroutine's id, for its stack
	stepAt   time.Time // the next step: the soft one, then the hard one
	tIdx     int       // index in the timeout heap; -1 when out of it
	step     runStep
}

// work runs one claimed batch through the policy: decode first, then the run-count check, the
// listener, and the settle. The lease is extended the whole time, the terminal path (dead-letter
// sink, OnError) included. Every step that is bookkeeping or app code is guarded so that it can
// never turn into a redelivery or a crash.
func (rn *runner) work(l *Listener, c *core.Claim) { rn.workAs(l, c, 0) }

// workAs is work on the worker goroutine gid (0: unknown, read when the run is timed).
func (rn *runner) workAs(l *Listener, c *core.Claim, gid uint64) {
	n := rn.e
	owned := true // false once a run's hard timeout step ended it instead of this worker
	released := false
	release := func() {
		if !released {
			released = true
			n.drv.release(c.Queue)
		}
	}
	defer func() {
		if owned {
			release()
			rn.workers.Done()
		}
	}()
	if n.held(c.Queue) { // paused after the dispatch: not started, given back for after the resume
		rn.giveBack(c)
		return
	}
	// The listener's context is not a child of runCtx (registering each one with a shared
	// parent costs a lock and a map entry per claim): cancelRunning cancels every registered
	// claim, and a claim registered after it sees runCtx done below.
	r := &running{claim: c, fs: &rn.fences, idx: -1, tIdx: -1}
	r.ctx.init(context.Background(), r)
	defer r.cancel(nil)
	_, held, extendNow := rn.startFence(r)
	if !held {
		n.stats.leaseLost.Add(1)
		n.log.Warn("txmq: batch arrived with its lease past its fence and could not be extended; not running it here", "queue", c.Queue, "batch", c.ID, "lease_until", c.LeaseUntil)
		if time.Now().Before(c.LeaseUntil) {
			// Given back while the backend may still take it: this delivery, which no
			// listener saw, then spends no run (the budget counts runs, not deliveries).
			// Past LeaseUntil every backend refuses the call; the batch returns after its
			// lease with this delivery counted, as after a crash.
			rn.giveBack(c)
		}
		return
	}
	defer func() {
		if owned {
			rn.stopFence(r)
		}
	}()
	if rn.runCtx.Err() != nil {
		r.cancel(context.Canceled)
	}
	var ctx context.Context = &r.ctx
	if extendNow {
		// A claim that waited (in an adapter's stash, a slow dispatch) is extended at once
		// rather than at the lease loop's next tick, to leave its extension the most time.
		rn.extendAsync(r)
	}

	d, err := safeDecode(l, c.Body, c.ID)
	if err != nil {
		rn.terminal(r, l.Spec, nil, core.ReasonUndecodable, err, 0)
		return
	}
	r.ids = &d.MessageIDs
	if rn.notYetDue(r, d) {
		return
	}
	run := d.Attempt + c.Deliveries
	var ids []string // the batch's message ids, for the ledger
	if n.recorder != nil {
		ids = d.MessageIDs.IDs()
		kept := rn.dropCancelled(r, l, d, ids)
		if kept == nil {
			return
		}
		if kept != d { // some were cancelled: the run's ids are the ones left
			d = kept
			r.ids = &d.MessageIDs
			ids = d.MessageIDs.IDs()
		}
	}
	if run > l.Spec.MaxAttempts {
		// The previous runs never settled: their nodes died holding the batch.
		rn.terminal(r, l.Spec, d, core.ReasonWorkerLost, fmt.Errorf("%w (queue %q, batch %s, %d runs)", core.ErrWorkerLost, c.Queue, d.ID, run-1), run-1)
		return
	}
	endSpan := func(error) {}
	if n.tracing != nil {
		var end func(error)
		if ctx, end = n.tracing.TraceRun(ctx, c.Queue, run, d); end != nil {
			endSpan = end
		}
	}

	// The clock is read before the run only for what needs the run's start (a ledger, the
	// Delivered hook): at one message per batch every read counts.
	var start time.Time
	timed := l.Spec.RunTimeout > 0
	if timed || n.recorder != nil || n.hooks.Delivered != nil {
		start = time.Now()
	}
	rn.recordRunning(r, d.ID, ids, start, run)
	n.stats.runs.Add(1)
	if timed {
		if gid == 0 {
			gid = goroutineID()
		}
		r.listener, r.batch, r.run, r.gid = l, d, run, gid
		rn.timeouts.add(r, start)
	}
	runErr := safeRun(ctx, d.Calls)
	endSpan(runErr)
	if timed && !rn.timeouts.finish(r) {
		owned = false // declared failed by the hard step, which settled it and freed its slot
		return
	}
	rn.afterRun(r, l, d, run, ids, start, timeoutCause(ctx, runErr), release)
}

// afterRun settles a run that ended with runErr (started at start, zero if unread): the
// Delivered hook, the history, then Ack, retry or the terminal path by the policy. release
// frees the run's slot (called early on success, while the Ack travels).
func (rn *runner) afterRun(r *running, l *Listener, d *Batch, run int, ids []string, start time.Time, runErr error, release func()) {
	n := rn.e
	c := r.claim
	end := time.Now()
	cause := r.ctx.cause()
	if n.halted.Load() {
		return // a simulated crash: no settle
	}
	if n.hooks.Delivered != nil {
		took := end.Sub(start)
		n.safeHook("Delivered", func() { n.hooks.Delivered(c.Queue, d.Count, run, took, runErr) })
	}

	l.history.add(end, d.Count, runErr != nil || r.lost.Load() || errors.Is(cause, core.ErrLeaseLost))
	if runErr != nil && l.Spec.ClassifyError != nil && !r.lost.Load() && !errors.Is(cause, core.ErrLeaseLost) && (!n.closing.Load() || cause == nil) {
		runErr = rn.classify(l.Spec, d, runErr, run)
	}
	switch {
	case r.lost.Load() || errors.Is(cause, core.ErrLeaseLost):
		// Fenced or lost: another node may hold the batch now; settling it here, even an Ack
		// of a run that succeeded, would act on a claim this node no longer holds.
		n.stats.failed.Add(1)
		n.log.Warn("txmq: listener stopped after its lease was lost; the batch runs again elsewhere", "queue", c.Queue, "batch", d.ID, "run", run, "error", runErr)
	case runErr == nil:
		n.stats.succeeded.Add(1)
		// The listener is done: its slot is free for the next batch while the Ack travels (the
		// lease is held until the Ack lands, and the backend keeps an Exclusive queue's batch
		// in flight until then). On a remote backend this overlaps the next claim with the Ack.
		release()
		// Without a Delivered hook no app code ran since end was read: the Ack's first attempt
		// starts from it (a clock read per batch less; the fence is judged microseconds
		// earlier, as if the call had started then).
		first := end
		if n.hooks.Delivered != nil {
			first = time.Time{}
		}
		err := rn.settleFrom(r, "Ack", first, func(ctx context.Context) error { return n.backend.Ack(ctx, c) })
		if err == nil {
			n.record(c.Queue, d.ID, ids, core.BatchEvent{State: core.StateCompleted, Node: n.id, Runs: run})
		}
		rn.settleErr(c, "ack", err)
	case n.closing.Load() && cause != nil:
		// Cancelled by Close: give the run back without spending the budget.
		n.stats.failed.Add(1)
		at := time.Now() // before the batch can run again elsewhere
		if rn.retry(r, d, run-1, 0, runErr) {
			n.record(c.Queue, d.ID, ids, core.BatchEvent{State: core.StateQueued, UpdatedAt: at, Node: n.id, Runs: run - 1})
		}
	case rn.outcomes(r, l, d, run, ids, runErr, release):
		// Per-message outcomes (Results, Snooze, Discard): settled group by group (outcomes.go).
	case core.IsPermanent(runErr):
		// The listener said no retry can fix it: dead letter now, whatever budget is left.
		n.stats.failed.Add(1)
		rn.terminal(r, l.Spec, d, core.ReasonPermanent, runErr, run)
	case run < l.Spec.MaxAttempts:
		n.stats.failed.Add(1)
		delay, ok := core.RetryDelay(runErr) // the listener's own delay, else the policy's
		if !ok {
			delay = rn.backoff(l.Spec, run)
		}
		at := time.Now() // before the batch can run again
		if rn.retry(r, d, run, delay, runErr) {
			n.record(c.Queue, d.ID, ids, core.BatchEvent{State: core.StateRetry, UpdatedAt: at, Due: at.Add(delay), Node: n.id, Runs: run, Error: errText(runErr)})
		}
	default:
		n.stats.failed.Add(1)
		rn.terminal(r, l.Spec, d, core.ReasonDeliveryExhausted, runErr, run)
	}
}

// settleCall returns a detached call context ending at deadline for one settle call: r's own
// the first time, a new one after (a retried settle). r.mu is held.
func (r *running) settleCall(deadline time.Time) *callCtx {
	if r.callUsed {
		return newDetachedCall(deadline)
	}
	r.callUsed = true
	r.call = callCtx{parent: context.Background(), deadline: deadline}
	return &r.call
}

// settleAttempts is how many times a settle is tried when the backend is unavailable, before
// the batch is left to come back after its lease expires.
const settleAttempts = 3

// settleBackoff is the pause before settle attempt i+1 (i from 0).
func settleBackoff(i int) time.Duration { return jitter(50 * time.Millisecond << i) }

// settle runs one settling backend call (Ack, Retry, Drop) on a detached context bounded by
// ClaimTimeout and by the claim's fence, after which the lease loop leaves the claim alone. A
// claim that is lost or past its fence is not settled (errFenced). A call failing with
// ErrBackendUnavailable is tried again, settleAttempts in all with a short backoff, while the
// fence allows; then the error is returned and the batch comes back after its lease expires.
func (rn *runner) settle(r *running, op string, fn func(ctx context.Context) error) error {
	return rn.settleFrom(r, op, time.Time{}, fn)
}

// settleFrom is settle whose first attempt starts at first, a time its caller has just read
// (zero: read the clock). first is used only if r.mu was free: a settle that waited for an
// extension in flight reads the clock after the wait.
func (rn *runner) settleFrom(r *running, op string, first time.Time, fn func(ctx context.Context) error) error {
	n := rn.e
	if !r.mu.TryLock() {
		r.mu.Lock()
		first = time.Time{}
	}
	defer r.mu.Unlock()
	r.settled = true
	var err error
	for i := range settleAttempts {
		now := first
		if i > 0 || now.IsZero() {
			now = time.Now()
		}
		fenceAt, ok := rn.holdsAt(r, now)
		if !ok {
			if err != nil {
				return fmt.Errorf("%w; last %s error: %w", errFenced, op, err)
			}
			return errFenced
		}
		call := r.settleCall(earliest(fenceAt, now.Add(n.opts.ClaimTimeout)))
		err = safeBackendCall(op, func() error { return fn(call) })
		call.cancel()
		if err == nil || !isUnavailable(err) || i == settleAttempts-1 {
			return err
		}
		wait := settleBackoff(i)
		if !time.Now().Add(wait).Before(fenceAt) {
			return err
		}
		n.log.Warn("txmq: "+op+" failed: backend unavailable; trying again", "queue", r.claim.Queue, "batch", r.claim.ID, "attempt", i+1, "retry_in", wait, "error", err)
		time.Sleep(wait)
	}
	return err
}

// safeBackendCall is safeCall for the backend method op, naming it only if it panics (a
// settle per batch need not build the name).
func safeBackendCall(op string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("txmq: backend %s panicked: %v", op, r)
		}
	}()
	return fn()
}

// retry re-encodes the batch with attempt runs spent and schedules it after delay. It
// reports whether the backend took the retry.
func (rn *runner) retry(r *running, d *Batch, attempt int, delay time.Duration, cause error) bool {
	n := rn.e
	c := r.claim
	body, err := envelope.ReencodeAttempt(c.Body, attempt)
	if err != nil { // cannot happen: the body decoded a moment ago
		body = c.Body
	}
	n.log.Info("txmq: batch failed; retrying", "queue", c.Queue, "batch", d.ID, "run", attempt, "retry_in", delay, "error", cause)
	if err := rn.settle(r, "Retry", func(ctx context.Context) error { return n.backend.Retry(ctx, c, body, delay) }); err != nil {
		rn.settleErr(c, "retry", err)
		return false
	}
	n.stats.retried.Add(1)
	if n.hooks.Retried != nil {
		n.safeHook("Retried", func() { n.hooks.Retried(c.Queue, attempt, delay) })
	}
	return true
}

// settleErr logs a failed settle; the batch comes back after its lease expires.
func (rn *runner) settleErr(c *core.Claim, op string, err error) {
	n := rn.e
	if err == nil {
		return
	}
	if errors.Is(err, errFenced) {
		// Counted as a lost lease when the fence fired.
		n.log.Warn("txmq: "+op+" not attempted: the claim passed its fence; the batch may run again elsewhere", "queue", c.Queue, "batch", c.ID, "error", err)
		return
	}
	if errors.Is(err, core.ErrLeaseLost) {
		n.stats.leaseLost.Add(1)
		n.log.Warn("txmq: "+op+" rejected: lease lost; the batch may run again elsewhere", "queue", c.Queue, "batch", c.ID)
		return
	}
	n.log.Error("txmq: "+op+" failed; the batch returns after its lease expires", "queue", c.Queue, "batch", c.ID, "error", err)
}

// terminal drops a batch: dead-letter it, count and log, call OnError, then remove it from the
// backend. Each step is guarded; none can cause a redelivery. The lease is extended meanwhile.
// It runs once per batch id: a batch this node already took down this path (its Drop failed
// and it came back), or one the sink reports as already dead-lettered (ErrAlreadyDeadLettered),
// is only dropped again, without a second dead letter, count or OnError.
func (rn *runner) terminal(r *running, spec *Spec, d *Batch, reason string, cause error, attempts int) {
	n := rn.e
	c := r.claim
	msgs, id, replays := 0, c.ID, 0
	if d != nil {
		msgs, id, replays = d.Count, d.ID, d.Replays
	}
	drop := func() {
		rn.settleErr(c, "drop", rn.settle(r, "Drop", func(ctx context.Context) error { return n.backend.Drop(ctx, c, reason) }))
	}
	key := terminalKey(c.Queue, id, replays)
	if id != "" && rn.terminals.seen(key) {
		n.log.Warn("txmq: batch came back after this node dead-lettered it (its Drop failed); dropping it again", "queue", c.Queue, "batch", id, "reason", reason)
		drop()
		return
	}
	if sink := n.opts.DeadLetters; sink != nil {
		var err error
		if perr := n.guard("dead-letter sink", func() {
			ctx, cancel := n.claimCtx()
			defer cancel()
			err = sink.DeadLetter(ctx, &core.DeadLetter{Queue: c.Queue, BatchID: id, Body: c.Body, Reason: reason,
				Error: errText(cause), Attempts: attempts, Messages: msgs, Exclusive: spec.Exclusive, At: time.Now(), Replays: replays})
		}); perr != nil {
			err = perr
		}
		switch {
		case id != "" && errors.Is(err, core.ErrAlreadyDeadLettered):
			rn.terminals.add(key)
			n.log.Warn("txmq: batch already dead-lettered (the store keeps its first reason); dropping it again without OnError", "queue", c.Queue, "batch", id, "reason", reason)
			drop()
			return
		case err != nil:
			n.guard("drop bookkeeping", func() {
				n.dropped(c.Queue, core.ReasonDeadLetterFailed, msgs, "txmq: dead-letter sink failed; batch dropped without a dead letter", "batch", id, "error", err)
			})
		}
	}
	if id != "" {
		rn.terminals.add(key)
	}
	n.guard("drop bookkeeping", func() {
		n.dropped(c.Queue, reason, msgs, "txmq: batch dropped", "batch", id, "attempts", attempts, "error", cause)
	})
	if d != nil && n.recorder != nil {
		n.record(c.Queue, id, d.MessageIDs.IDs(), core.BatchEvent{State: core.StateDead, Node: n.id, Runs: attempts, Error: errText(cause), Reason: reason})
	}
	if d != nil && d.HasOnError {
		n.guard("OnError", func() {
			if err := d.Calls.OnError(cause, attempts); err != nil {
				n.log.Error("txmq: OnError returned an error (ignored)", "queue", c.Queue, "batch", id, "error", err)
			}
		})
	}
	drop()
}

// guard runs fn, logging a panic and returning it as an error instead of propagating it.
func (n *Engine) guard(what string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in %s: %v", what, r)
			n.log.Error("txmq: panic in "+what+" (recovered)", "panic", r)
		}
	}()
	fn()
	return nil
}

// safeDecode decodes a batch, turning a decoder panic into an error.
func safeDecode(l *Listener, body []byte, id string) (d *Batch, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoder panicked: %v", core.ErrUndecodable, r)
		}
	}()
	return l.Decode(body, id)
}

// safeRun runs a batch's listener, turning a panic into an error (the app API's Calls
// recover the listener's own panics into a txmq.PanicError; this guards the rest).
func safeRun(ctx context.Context, b Calls) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("txmq: listener panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return b.Run(ctx)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
