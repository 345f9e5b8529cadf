// Package ledgermode is ledger mode (Config.Ledger with its mode on, package ledger): before
// the engine writes a batch to the backend, the ledger keeps a copy in the app database, and
// a background loop publishes again the batches a lossy backend left unsettled (one pass at a
// time across the cluster). The life of each message is recorded by another feature
// (feature/record, an engine.Recorder); this package adds only the copies.
package ledgermode

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Keeper is a ledger that can run ledger mode (package ledger's *Ledger).
type Keeper interface {
	// Mode reports whether ledger mode is on.
	Mode() bool
	// KeepBatch keeps b before it is written to the backend.
	KeepBatch(ctx context.Context, b core.OutgoingBatch) error
	// RunRepublisher publishes the kept batches left unsettled again until ctx ends.
	RunRepublisher(ctx context.Context, publish func(ctx context.Context, b core.OutgoingBatch) error)
}

// Copies is the ledger-mode feature: an engine.Writer and an engine.Looper.
type Copies struct {
	k Keeper
	e *engine.Engine
}

// New returns ledger mode over k; it does nothing while k's mode is off.
func New(k Keeper) *Copies { return &Copies{k: k} }

// Attach implements engine.Attacher.
func (c *Copies) Attach(e *engine.Engine) { c.e = e }

// BeforeWrite keeps b in the ledger before the engine writes it to the backend
// (engine.Writer). A ledger that cannot keep it (the app database does not answer) is logged
// and the batch is published anyway: it is then as safe as its backend makes it, and no
// safer.
func (c *Copies) BeforeWrite(ctx context.Context, b core.OutgoingBatch) {
	if !c.k.Mode() {
		return
	}
	if err := keep(ctx, c.k, b); err != nil {
		c.e.Logger().Warn("txmq: ledger mode could not keep a batch; publishing it without the ledger's copy (a backend that loses it loses it)", "queue", b.Queue, "batch", b.ID, "error", err)
	}
}

// keep calls KeepBatch, turning its panic into an error.
func keep(ctx context.Context, k Keeper, b core.OutgoingBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("txmq: ledger KeepBatch panicked: %v", r)
		}
	}()
	return k.KeepBatch(ctx, b)
}

// Loop runs the republisher until ctx ends (engine.Looper), recovering its panics.
func (c *Copies) Loop(ctx context.Context) {
	if !c.k.Mode() {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.e.Logger().Error("txmq: panic in ledger republisher (recovered)", "panic", r)
		}
	}()
	c.k.RunRepublisher(ctx, c.e.PublishStored)
}
