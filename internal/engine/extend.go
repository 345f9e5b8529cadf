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
	}
}

// Wake interrupts the fetch in progress and wakes the driver, so that its next request sees
// a change a feature made (a queue held or let go).
func (n *Engine) Wake() {
	n.drv.cancelFetch()
	n.drv.signal()
}

// Stopped returns a context done when the engine stops fetching.
func (n *Engine) Stopped() context.Context { return n.stopCtx }
