package engine

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// Run timeouts (Spec.RunTimeout, Spec.RunGrace) end a run in two steps:
//
//   - soft, at RunTimeout after the listener started: its ctx is cancelled with a cause
//     wrapping core.ErrRunTimeout. A listener that returns an error then fails the run as any
//     error does (retry with backoff, spending the budget, or the terminal path), its error
//     wrapped in the timeout; one that returns nil succeeded (its work is done) and is acked.
//   - hard, RunGrace later, if the listener has still not returned: the run is declared failed
//     without it. The goroutine's stack is logged, and the run takes the policy's failure
//     path at once: the claim is settled (Retry after the backoff, or the terminal path when
//     the budget is spent; one run counted), its slot freed and its fence removed, so the
//     lease is no longer extended. Go cannot stop a goroutine: the stuck listener keeps
//     running with a done ctx, and its return, whenever it comes, is ignored.
//
// Why a timed-out run cannot overlap the next run of its batch or of its Exclusive queue
// (while its listener honours its ctx within the grace): its ctx is done from the soft step
// on; the batch is held by this node's claim until the hard step settles it (or, if that
// settle fails, until the lease this node stopped extending runs out), and neither the
// batch nor the Exclusive queue can be handed out before that. If the lease is lost earlier,
// the fence cancels the listener at LeaseUntil - margin, before anyone else can claim it, as
// for any run.
//
// timeoutSet holds the node's timed runs ordered by their next step, with one timer for the
// node (as fenceSet does for fences): a run that ends in time costs a heap push and remove
// under one lock. mu guards every running's step fields (stepAt, tIdx, step) and the heap.
type timeoutSet struct {
	mu    sync.Mutex
	h     timeoutHeap
	timer *time.Timer
	armed time.Time // when timer fires; zero when not armed
	fire  func()
}

// runStep is where a timed run is: its next step, or how it ended.
type runStep uint8

const (
	stepSoft      runStep = iota // running, before its timeout
	stepHard                     // its ctx cancelled, before its grace ends
	stepFinished                 // the listener returned in time: its worker ends the run
	stepAbandoned                // the hard step ended the run: its worker does nothing more
)

// timeoutHeap is a min-heap of runs by stepAt; each running keeps its index in tIdx.
type timeoutHeap []*running

func (h timeoutHeap) Len() int           { return len(h) }
func (h timeoutHeap) Less(i, j int) bool { return h[i].stepAt.Before(h[j].stepAt) }
func (h timeoutHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].tIdx, h[j].tIdx = i, j
}

// Push appends x (a *running); use heap.Push.
func (h *timeoutHeap) Push(x any) {
	r := x.(*running)
	r.tIdx = len(*h)
	*h = append(*h, r)
}

// Pop removes the last element; use heap.Pop.
func (h *timeoutHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.tIdx = -1
	return r
}

// add registers r, whose listener starts now, for its soft step at now + its timeout.
func (s *timeoutSet) add(r *running, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.stepAt = now.Add(r.listener.Spec.RunTimeout)
	heap.Push(&s.h, r)
	s.armLocked(r.stepAt)
}

// armLocked makes sure the timer fires no later than at.
func (s *timeoutSet) armLocked(at time.Time) {
	if !s.armed.IsZero() && !at.Before(s.armed) {
		return
	}
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.fire)
		return
	}
	s.timer.Reset(time.Until(at))
}

// finish takes r out when its listener returned and reports whether the worker still owns
// the run: false if the hard step already declared it failed.
func (s *timeoutSet) finish(r *running) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.step == stepAbandoned {
		return false
	}
	r.step = stepFinished
	if r.tIdx >= 0 {
		heap.Remove(&s.h, r.tIdx)
	}
	return true
}

// expireLocked takes the steps due at now: runs past their timeout go back in for their hard
// step (soft), runs past their grace are marked abandoned (hard). It re-arms the timer.
func (s *timeoutSet) expireLocked(now time.Time) (soft, hard []*running) {
	for len(s.h) > 0 && !now.Before(s.h[0].stepAt) {
		r := heap.Pop(&s.h).(*running)
		if r.step == stepHard {
			r.step = stepAbandoned
			hard = append(hard, r)
			continue
		}
		r.step = stepHard
		r.stepAt = r.stepAt.Add(r.listener.Spec.RunGrace)
		heap.Push(&s.h, r)
		soft = append(soft, r)
	}
	s.armed = time.Time{}
	if len(s.h) > 0 {
		s.armLocked(s.h[0].stepAt)
	}
	return soft, hard
}

// timeoutExpired is the timeout timer's func: it cancels the runs past their timeout and
// declares failed those past their grace.
func (rn *runner) timeoutExpired() {
	rn.timeouts.mu.Lock()
	soft, hard := rn.timeouts.expireLocked(time.Now())
	rn.timeouts.mu.Unlock()
	for _, r := range soft {
		rn.timedOut(r)
	}
	for _, r := range hard {
		go rn.abandon(r)
	}
}

// timedOut is the soft step: r's listener's ctx is cancelled.
func (rn *runner) timedOut(r *running) {
	n := rn.e
	q, spec := r.claim.Queue, r.listener.Spec
	n.stats.timedOut.Add(1)
	n.log.Warn("txmq: run passed its queue's RunTimeout; cancelling its listener's ctx", "queue", q, "batch", r.claim.ID,
		"run", r.run, "run_timeout", spec.RunTimeout, "grace", spec.RunGrace)
	if n.hooks.TimedOut != nil {
		n.safeHook("TimedOut", func() { n.hooks.TimedOut(q, r.run, false) })
	}
	r.cancel(fmt.Errorf("%w: queue %q: the listener ran longer than its RunTimeout %v", core.ErrRunTimeout, q, spec.RunTimeout))
}

// abandon is the hard step: r's listener did not return within its grace. Its stack is
// logged, and the run takes the failure path without it: settled by the policy, then its
// fence removed (no more extensions), its slot freed, and the admitted batch done.
func (rn *runner) abandon(r *running) {
	n := rn.e
	c, spec := r.claim, r.listener.Spec
	n.stats.stuck.Add(1)
	n.log.Error("txmq: listener still running after its RunTimeout and grace; declaring the run failed (the goroutine is left running: make the listener honour its ctx)",
		"queue", c.Queue, "batch", c.ID, "run", r.run, "run_timeout", spec.RunTimeout, "grace", spec.RunGrace, "stack", goroutineStack(r.gid))
	if n.hooks.TimedOut != nil {
		n.safeHook("TimedOut", func() { n.hooks.TimedOut(c.Queue, r.run, true) })
	}
	err := fmt.Errorf("%w: queue %q: the listener did not return within its RunTimeout %v and a grace of %v", core.ErrRunTimeout, c.Queue, spec.RunTimeout, spec.RunGrace)
	// The run started a timeout and a grace before its hard step (stepAt is no longer moved);
	// its ledger ids, if any, were recorded before the timeout was armed.
	start := r.stepAt.Add(-spec.RunTimeout - spec.RunGrace)
	released := false
	release := func() { // once: afterRun releases early only on success, which this is not
		if !released {
			released = true
			n.drv.release(c.Queue)
		}
	}
	var ids []string
	if r.ledger != nil {
		ids = r.ledger.ids
	}
	rn.afterRun(r, r.listener, r.batch, r.run, ids, start, err, release)
	rn.stopFence(r)
	r.cancel(nil)
	release()
	rn.workers.Done()
}

// timeoutCause wraps runErr, a run's error, in ctx's cause when the run timeout cancelled it.
func timeoutCause(ctx context.Context, runErr error) error {
	if runErr == nil { // before the cause: a listener's context is then left unmade
		return nil
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, core.ErrRunTimeout) || errors.Is(runErr, core.ErrRunTimeout) {
		return runErr
	}
	return fmt.Errorf("%w; the listener returned: %w", cause, runErr)
}

// maxStackBytes bounds the stack logged for a stuck listener.
const maxStackBytes = 64 << 10

// goroutineID returns the calling goroutine's id, read from its stack header ("goroutine N
// [...]"); 0 if it cannot be read. It costs a stack trace: workers read it once.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(string(b[:i]), 10, 64)
		return id
	}
	return 0
}

// goroutineStack returns the stack of goroutine id, read from a dump of all goroutines, cut at
// maxStackBytes; a note when it is not found.
func goroutineStack(id uint64) string {
	if id == 0 {
		return "(the worker's goroutine id is unknown)"
	}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	head := []byte("goroutine " + strconv.FormatUint(id, 10) + " [")
	i := bytes.Index(buf, head)
	if i < 0 || (i > 0 && buf[i-1] != '\n') {
		return "(the worker's goroutine was not found: it ended)"
	}
	st := buf[i:]
	if j := bytes.Index(st, []byte("\n\n")); j >= 0 {
		st = st[:j]
	}
	if len(st) > maxStackBytes {
		st = st[:maxStackBytes]
	}
	return string(st)
}
