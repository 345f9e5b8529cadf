package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// running is one batch a worker holds, from decode to settle, shared with the lease loop and
// the claim's fence timer.
type running struct {
	claim     *Claim
	cancel    context.CancelCauseFunc
	lost      atomic.Bool // the lease was lost or fenced; written under fmu
	extending atomic.Bool // an extension is in flight

	mu      sync.Mutex // serialises Extend with the settle of the same claim
	settled bool

	fmu     sync.Mutex  // guards the fence
	fenceAt time.Time   // confirmed lease end minus the margin, on this node's clock
	fence   *time.Timer // fires at fenceAt
	done    bool        // the worker is done with the claim
}

// work runs one claimed batch through the policy: decode first, then the run-count check, the
// listener, and the settle. The lease is extended the whole time, the terminal path (dead-letter
// sink, OnError) included. Every step that is bookkeeping or app code is guarded so that it can
// never turn into a redelivery or a crash.
func (n *Node) work(l *listener, c *Claim) {
	defer n.workers.Done()
	released := false
	release := func() {
		if !released {
			released = true
			n.release(c.Queue)
		}
	}
	defer release()
	ctx, cancel := context.WithCancelCause(n.runCtx)
	defer cancel(nil)
	r := &running{claim: c, cancel: cancel}
	if !n.startFence(r) {
		n.stats.leaseLost.Add(1)
		n.log.Warn("txmq: batch arrived with its lease past its fence and could not be extended; not running it here", "queue", c.Queue, "batch", c.ID, "lease_until", c.LeaseUntil)
		return
	}
	defer n.stopFence(r)
	ctx = context.WithValue(ctx, leaseKey{}, r)
	n.mu.Lock()
	n.running[r] = struct{}{}
	n.mu.Unlock()
	if n.dueForExtension(r) {
		// A claim that waited (in an adapter's stash, a slow dispatch) is extended at once
		// rather than at the lease loop's next tick, to leave its extension the most time.
		n.extendAsync(r)
	}
	defer func() {
		n.mu.Lock()
		delete(n.running, r)
		n.mu.Unlock()
	}()

	d, err := safeDecode(l, c.Body)
	if err != nil {
		n.terminal(r, l.spec, nil, ReasonUndecodable, err, 0)
		return
	}
	if n.notYetDue(r, d) {
		return
	}
	run := d.attempt + c.Deliveries
	if run > l.spec.maxAttempts {
		// The previous runs never settled: their nodes died holding the batch.
		n.terminal(r, l.spec, d, ReasonWorkerLost, fmt.Errorf("%w (queue %q, batch %s, %d runs)", ErrWorkerLost, c.Queue, d.id, run-1), run-1)
		return
	}
	if n.opts.ExtractTrace != nil && len(d.trace) > 0 {
		ctx = n.withTrace(ctx, d.trace)
	}

	start := time.Now()
	n.stats.runs.Add(1)
	runErr := safeRun(ctx, d.run)
	took := time.Since(start)
	cause := context.Cause(ctx)
	if n.halted.Load() {
		return // a simulated crash: no settle
	}
	if n.hooks.Delivered != nil {
		n.safeHook("Delivered", func() { n.hooks.Delivered(c.Queue, d.count, run, took, runErr) })
	}

	switch {
	case r.lost.Load() || errors.Is(cause, ErrLeaseLost):
		// Fenced or lost: another node may hold the batch now; settling it here, even an Ack
		// of a run that succeeded, would act on a claim this node no longer holds.
		n.stats.failed.Add(1)
		n.log.Warn("txmq: listener stopped after its lease was lost; the batch runs again elsewhere", "queue", c.Queue, "batch", d.id, "run", run, "error", runErr)
	case runErr == nil:
		n.stats.succeeded.Add(1)
		// The listener is done: its slot is free for the next batch while the Ack travels (the
		// lease is held until the Ack lands, and the backend keeps an Exclusive queue's batch
		// in flight until then). On a remote backend this overlaps the next claim with the Ack.
		release()
		n.settleErr(c, "ack", n.settle(r, "Ack", func(ctx context.Context) error { return n.backend.Ack(ctx, c) }))
	case n.closing.Load() && cause != nil:
		// Cancelled by Close: give the run back without spending the budget.
		n.stats.failed.Add(1)
		n.retry(r, d, run-1, 0, runErr)
	case run < l.spec.maxAttempts:
		n.stats.failed.Add(1)
		n.retry(r, d, run, n.backoff(run), runErr)
	default:
		n.stats.failed.Add(1)
		n.terminal(r, l.spec, d, ReasonDeliveryExhausted, runErr, run)
	}
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
func (n *Node) settle(r *running, op string, fn func(ctx context.Context) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled = true
	var err error
	for i := range settleAttempts {
		fenceAt, ok := n.holds(r)
		if !ok {
			if err != nil {
				return fmt.Errorf("%w; last %s error: %w", errFenced, op, err)
			}
			return errFenced
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest(fenceAt, time.Now().Add(n.opts.ClaimTimeout)))
		err = safeCall("backend "+op, func() error { return fn(ctx) })
		cancel()
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

// backoff returns the retry delay after run; a panicking Backoff falls back to DefaultBackoff.
func (n *Node) backoff(run int) (d time.Duration) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.Backoff panicked; using DefaultBackoff (fix the Backoff func)", "panic", r)
			d = DefaultBackoff(run)
		}
	}()
	return max(n.opts.Backoff(run), 0)
}

// withTrace returns ctx carrying the batch's trace context; if ExtractTrace panics the listener
// runs without it.
func (n *Node) withTrace(ctx context.Context, trace map[string]string) (out context.Context) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("txmq: NodeOptions.ExtractTrace panicked; running the listener without the trace context", "panic", r)
			out = ctx
		}
	}()
	if out = n.opts.ExtractTrace(ctx, trace); out == nil {
		out = ctx
	}
	return out
}

// retry re-encodes the batch with attempt runs spent and schedules it after delay.
func (n *Node) retry(r *running, d *decoded, attempt int, delay time.Duration, cause error) {
	c := r.claim
	body, err := ReencodeAttempt(c.Body, attempt)
	if err != nil { // cannot happen: the body decoded a moment ago
		body = c.Body
	}
	n.log.Info("txmq: batch failed; retrying", "queue", c.Queue, "batch", d.id, "run", attempt, "retry_in", delay, "error", cause)
	if err := n.settle(r, "Retry", func(ctx context.Context) error { return n.backend.Retry(ctx, c, body, delay) }); err != nil {
		n.settleErr(c, "retry", err)
		return
	}
	n.stats.retried.Add(1)
	if n.hooks.Retried != nil {
		n.safeHook("Retried", func() { n.hooks.Retried(c.Queue, attempt, delay) })
	}
}

// settleErr logs a failed settle; the batch comes back after its lease expires.
func (n *Node) settleErr(c *Claim, op string, err error) {
	if err == nil {
		return
	}
	if errors.Is(err, errFenced) {
		// Counted as a lost lease when the fence fired.
		n.log.Warn("txmq: "+op+" not attempted: the claim passed its fence; the batch may run again elsewhere", "queue", c.Queue, "batch", c.ID, "error", err)
		return
	}
	if errors.Is(err, ErrLeaseLost) {
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
func (n *Node) terminal(r *running, spec *queueSpec, d *decoded, reason string, cause error, attempts int) {
	c := r.claim
	msgs, id := 0, c.ID
	if d != nil {
		msgs, id = d.count, d.id
	}
	drop := func() {
		n.settleErr(c, "drop", n.settle(r, "Drop", func(ctx context.Context) error { return n.backend.Drop(ctx, c, reason) }))
	}
	key := terminalKey(c.Queue, id)
	if id != "" && n.terminals.seen(key) {
		n.log.Warn("txmq: batch came back after this node dead-lettered it (its Drop failed); dropping it again", "queue", c.Queue, "batch", id, "reason", reason)
		drop()
		return
	}
	if sink := n.opts.DeadLetters; sink != nil {
		var err error
		if perr := n.guard("dead-letter sink", func() {
			ctx, cancel := n.claimCtx()
			defer cancel()
			err = sink.DeadLetter(ctx, &DeadLetter{Queue: c.Queue, BatchID: id, Body: c.Body, Reason: reason,
				Error: errText(cause), Attempts: attempts, Messages: msgs, Exclusive: spec.exclusive, At: time.Now()})
		}); perr != nil {
			err = perr
		}
		switch {
		case id != "" && errors.Is(err, ErrAlreadyDeadLettered):
			n.terminals.add(key)
			n.log.Warn("txmq: batch already dead-lettered (the store keeps its first reason); dropping it again without OnError", "queue", c.Queue, "batch", id, "reason", reason)
			drop()
			return
		case err != nil:
			n.guard("drop bookkeeping", func() {
				n.dropped(c.Queue, ReasonDeadLetterFailed, msgs, "txmq: dead-letter sink failed; batch dropped without a dead letter", "batch", id, "error", err)
			})
		}
	}
	if id != "" {
		n.terminals.add(key)
	}
	n.guard("drop bookkeeping", func() {
		n.dropped(c.Queue, reason, msgs, "txmq: batch dropped", "batch", id, "attempts", attempts, "error", cause)
	})
	if d != nil && d.onError != nil {
		n.guard("OnError", func() {
			if err := d.onError(cause, attempts); err != nil {
				n.log.Error("txmq: OnError returned an error (ignored)", "queue", c.Queue, "batch", id, "error", err)
			}
		})
	}
	drop()
}

// guard runs fn, logging a panic and returning it as an error instead of propagating it.
func (n *Node) guard(what string, fn func()) (err error) {
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
func safeDecode(l *listener, body []byte) (d *decoded, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoder panicked: %v", ErrUndecodable, r)
		}
	}()
	return l.decode(body)
}

// PanicError is the failure of a listener that panicked.
type PanicError struct {
	// Value is what the listener panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("txmq: listener panicked: %v", e.Value) }

// safeRun runs a listener, turning a panic into a *PanicError.
func safeRun(ctx context.Context, run func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return run(ctx)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
