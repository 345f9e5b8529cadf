package parity

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// faulty wraps one client to inject faults into its lease and settle calls, so every adapter
// inherits the fault properties without Harness support. The zero fault settings pass every
// call through.
type faulty struct {
	core.Backend

	// extendFails makes every Extend fail with an error wrapping core.ErrBackendUnavailable.
	extendFails atomic.Bool
	// extendHangs makes every Extend hang until its ctx ends (then return ctx's error).
	extendHangs atomic.Bool
	// dropFails is how many of the next Drop calls fail with core.ErrBackendUnavailable.
	dropFails atomic.Int64

	extends, drops atomic.Int64 // calls seen
}

// errFault is the injected unavailability.
var errFault = fmt.Errorf("parity: injected fault: %w", core.ErrBackendUnavailable)

func (f *faulty) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	f.extends.Add(1)
	switch {
	case f.extendHangs.Load():
		<-ctx.Done()
		return fmt.Errorf("parity: injected hang: %w", ctx.Err())
	case f.extendFails.Load():
		return errFault
	}
	return f.Backend.Extend(ctx, c, lease)
}

func (f *faulty) Drop(ctx context.Context, c *core.Claim, reason string) error {
	f.drops.Add(1)
	if f.dropFails.Add(-1) >= 0 {
		return errFault
	}
	return f.Backend.Drop(ctx, c, reason)
}

// Unwrap exposes the wrapped client, so that a node finds its capabilities (per-key order,
// splits, ...) as it does through checked; the faults stay on the calls faulty makes itself.
func (f *faulty) Unwrap() core.Backend { return f.Backend }

// faultyNode returns a started node on a new checked client wrapped in faulty.
func (x *X) faultyNode(o txmq.NodeOptions) (*txmq.Node, *faulty) {
	x.T.Helper()
	c, _ := x.client()
	f := &faulty{Backend: c}
	return x.nodeOn(f, o), f
}
