package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// A feature plugs into an engine through Options.Features: a value implementing any of the
// extension points below, found by type assertion at New. The engine imports no feature; a
// feature imports the engine for these interfaces and for the Engine methods it calls
// (Wake, Logger, Clock). Package internal/feature builds the features from the app's
// options; docs/architecture.md says how to add one.

// Attacher is told the engine it is plugged into, at New, before anything runs.
type Attacher interface {
	Attach(e *Engine)
}

// Gate holds queues back (pause): the driver leaves a held queue out of its fetches, and a
// claim of a held queue is given back unrun at dispatch and again before its run (it was
// fetched before the engine saw the hold). Held is asked once per fetched batch: it must be
// cheap and must not block.
type Gate interface {
	Held(queue string) bool
}

// Admitter rations how many batches of a queue may start (rate limit). Before each fetch
// the driver asks Admit with the queues it may fetch and their free slots (want[i],
// core.Unlimited when uncapped); the result maps each queue the admitter limits to the
// batches it may start (0: none now, the queue is left out of the fetch), and retryIn is
// how soon a queue that got none may get some (0: no hint). What the fetch does not use is
// given back with Return. ctx ends when the engine stops. One Admitter per engine.
type Admitter interface {
	Admit(ctx context.Context, specs []*Spec, want []int) (granted map[string]int, retryIn time.Duration)
	Return(ctx context.Context, spec *Spec, n int)
}

// Tracing carries trace contexts (trace). TracePublish is asked once per publish call,
// before anything is stored, for the trace context to store with its messages (nil: none);
// TraceRun before each listener run, for the listener's ctx and the func to call with the
// run's error when it ends (nil: none). Both guard the app's code they call. One Tracing
// per engine.
type Tracing interface {
	TracePublish(ctx context.Context, queue string, messages int) map[string]string
	TraceRun(ctx context.Context, queue string, run int, b *Batch) (context.Context, func(error))
}

// Writer is told of each batch the publisher is about to write to the backend, within the
// write's context (ledger mode keeps its copy first). It must log its own failures: the
// batch is written whatever it does.
type Writer interface {
	BeforeWrite(ctx context.Context, b core.OutgoingBatch)
}

// Preparer runs once in Start, before the driver's first fetch (the pause reader's first
// read). ctx ends when the engine stops.
type Preparer interface {
	Prepare(ctx context.Context)
}

// Looper runs a background loop for the engine's life, started by Start (schedules, the
// pause reader). Loop must return once ctx is done; Close and Halt wait for it.
type Looper interface {
	Loop(ctx context.Context)
}

// Recorder is told the life of each batch's messages (the ledger: package ledger through
// feature/record), and asked which are cancelled:
//
//   - Stored when the backend (state core.StateQueued) or the outbox (core.StateOutbox) took
//     batch b; at is the time before the write began, older than any run of it;
//   - Committed when a publish staged in a transaction committed (its messages ids, due
//     time, and the time before the commit);
//   - Running when run number run of a batch starts on this node, and again with the same
//     start and run whenever an extension confirms its lease (leaseEnd is the lease's end);
//   - Record for every other event (completed, retried, given back, dead, cancelled), with
//     its Queue, BatchID, IDs and Node set;
//   - Cancelled before each run: which messages of a claimed batch are cancelled (in that
//     batch: a cancel never applies to a later publish of the id).
//
// ids become the recorder's: the engine does not change them afterwards. The engine turns a
// panic of any call into a log line (Cancelled's into an error: the batch then runs whole).
// One Recorder per engine; none: nothing is recorded and nothing is cancelled.
type Recorder interface {
	Stored(b core.OutgoingBatch, state core.MessageState, at time.Time)
	Committed(queue string, ids []string, due, at time.Time)
	Running(queue, batch string, ids []string, run int, start, leaseEnd time.Time)
	Record(ev core.BatchEvent)
	Cancelled(ctx context.Context, c core.CancelCheck) (map[string]bool, error)
}

// PublishFunc writes one batch to the backend and returns it as stored: fewer Messages when
// some were left out (0: none stored, which is a success).
type PublishFunc func(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error)

// PublishWrapper wraps every write of a batch to the backend (the publisher's, and
// Engine.PublishStored's): id dedup leaves out the messages whose caller ids the backend
// already holds. Wrappers apply in the order of Options.Features, the first outermost.
type PublishWrapper interface {
	WrapPublish(next PublishFunc) PublishFunc
}

// SpecChecker refuses a queue the engine cannot serve as declared (id dedup: an
// IDDedupWindow the backend cannot honour), with an error naming the queue and what to do.
// It is asked at New for the queues already declared, then at Listen and at each publish: it
// must be cheap.
type SpecChecker interface {
	CheckSpec(spec *Spec) error
}

// held reports whether a Gate holds queue back.
func (n *Engine) held(queue string) bool {
	for _, g := range n.gates {
		if g.Held(queue) {
			return true
		}
	}
	return false
}

// plug sorts the features into the extension points.
func (n *Engine) plug(features []any) {
	for _, f := range features {
		if a, ok := f.(Attacher); ok {
			a.Attach(n)
		}
		if g, ok := f.(Gate); ok {
			n.gates = append(n.gates, g)
		}
		if a, ok := f.(Admitter); ok {
			n.admitter = a
		}
		if t, ok := f.(Tracing); ok {
			n.tracing = t
		}
		if w, ok := f.(Writer); ok {
			n.writers = append(n.writers, w)
		}
		if p, ok := f.(Preparer); ok {
			n.preparers = append(n.preparers, p)
		}
		if l, ok := f.(Looper); ok {
			n.loopers = append(n.loopers, l)
		}
		if r, ok := f.(Recorder); ok {
			n.recorder = r
		}
		if c, ok := f.(SpecChecker); ok {
			n.checkers = append(n.checkers, c)
		}
	}
	n.publishFn = func(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error) {
		return b, n.backend.Publish(ctx, b)
	}
	for i := len(features) - 1; i >= 0; i-- {
		if w, ok := features[i].(PublishWrapper); ok {
			n.publishFn = w.WrapPublish(n.publishFn)
		}
	}
}

// CountDeduplicated adds k messages to Stats.Deduplicated: a PublishWrapper left them out
// because the backend already held their ids.
func (n *Engine) CountDeduplicated(k int) { n.stats.deduplicated.Add(int64(k)) }

// Wake interrupts the fetch in progress and wakes the driver, so that its next request sees
// a change a feature made (a queue held or let go).
func (n *Engine) Wake() {
	n.drv.cancelFetch()
	n.drv.signal()
}

// Stopped returns a context done when the engine stops fetching.
func (n *Engine) Stopped() context.Context { return n.stopCtx }
