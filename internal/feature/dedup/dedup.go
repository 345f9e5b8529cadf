// Package dedup is id dedup (QueueConfig.IDDedupWindow): messages published with caller ids
// (ID/IDs) are stored once per id within the queue's window. It is an engine.SpecChecker,
// which refuses a window the node's backend cannot honour, and an engine.PublishWrapper,
// which leaves out of each batch written the messages whose ids the backend already holds
// (counted in Stats.Deduplicated). The repeats that meet in one flush are left out by the
// engine itself before the backend is asked.
package dedup

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/iddedup"
)

// IDs is the id dedup feature: an engine.Attacher, engine.SpecChecker and
// engine.PublishWrapper.
type IDs struct {
	// support is how the backend deduplicates caller ids (core.DedupsIDs), and err why it
	// cannot (nil when it can).
	support core.DedupSupport
	err     error
	e       *engine.Engine
}

// New returns id dedup on backend.
func New(backend core.Backend) *IDs {
	d := &IDs{}
	d.support, d.err = core.DedupsIDs(backend)
	return d
}

// Attach implements engine.Attacher.
func (d *IDs) Attach(e *engine.Engine) { d.e = e }

// CheckSpec implements engine.SpecChecker: a queue with an IDDedupWindow needs a backend that
// deduplicates caller ids, for at least that long.
func (d *IDs) CheckSpec(spec *engine.Spec) error {
	if spec == nil || spec.IDWindow <= 0 {
		return nil
	}
	if d.err != nil {
		return fmt.Errorf("txmq: queue %q has an IDDedupWindow but this node's backend cannot deduplicate message ids; use an adapter that can (see each adapter's \"Delivery semantics\") or declare the queue without IDDedupWindow: %w", spec.Name, d.err)
	}
	if w := d.support.MaxWindow; w > 0 && spec.IDWindow > w {
		return fmt.Errorf("%w: queue %q: IDDedupWindow %v is longer than this backend keeps ids (%v); declare a window of at most %v", core.ErrInvalidConfig, spec.Name, spec.IDWindow, w, w)
	}
	return nil
}

// WrapPublish implements engine.PublishWrapper: a batch whose caller ids deduplicate leaves
// out the messages the backend already holds (counted, logged at debug) and stores the rest;
// the others go to next as they are.
func (d *IDs) WrapPublish(next engine.PublishFunc) engine.PublishFunc {
	return func(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error) {
		if b.DedupWindow <= 0 {
			return next(ctx, b)
		}
		publish := func(ctx context.Context, b core.OutgoingBatch) error {
			_, err := next(ctx, b)
			return err
		}
		stored, dropped, err := iddedup.Publish(ctx, publish, b)
		if len(dropped) > 0 {
			d.e.CountDeduplicated(len(dropped))
			d.e.Logger().Debug("txmq: message ids already published within the queue's IDDedupWindow; left out", "queue", b.Queue, "batch", b.ID, "ids", len(dropped))
		}
		return stored, err
	}
}
