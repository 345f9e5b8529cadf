package memory_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

type mut struct {
	core.Backend
	kind string
	n    *atomic.Int64
}

func (m mut) Publish(ctx context.Context, b core.OutgoingBatch) error {
	switch m.kind {
	case "early":
		b.NotBefore = time.Time{}
	case "lossy":
		if m.n.Add(1)%50 == 0 {
			return nil
		}
	}
	return m.Backend.Publish(ctx, b)
}

func (m mut) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	switch m.kind {
	case "nonexcl":
		for i := range req.Queues {
			req.Queues[i].Exclusive = false
			req.Queues[i].Free = core.Unlimited
		}
	case "greedy":
		for i := range req.Queues {
			req.Queues[i].Free = core.Unlimited
		}
	}
	return m.Backend.Fetch(ctx, req)
}

func (m mut) Ack(ctx context.Context, c *core.Claim) error {
	err := m.Backend.Ack(ctx, c)
	if m.kind == "leaky" && errors.Is(err, core.ErrLeaseLost) {
		return nil
	}
	return err
}

func (m mut) Extend(ctx context.Context, c *core.Claim, d time.Duration) error {
	if m.kind == "noextend" {
		return nil
	}
	return m.Backend.Extend(ctx, c, d)
}

type mharness struct{ kind string }

func (h mharness) Name() string               { return "mut-" + h.kind }
func (mharness) Capabilities() parity.Caps   { return parity.Caps{} }
func (h mharness) Open(t *testing.T) parity.Env {
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	return menv{be, h.kind, &atomic.Int64{}}
}

type menv struct {
	be   *memory.Backend
	kind string
	n    *atomic.Int64
}

func (e menv) Backend(*testing.T) core.Backend { return mut{e.be, e.kind, e.n} }
func (e menv) Break(*testing.T)                 { e.be.Break() }
func (e menv) Restore(*testing.T)               { e.be.Restore() }

func TestMutants(t *testing.T) {
	parity.Run(t, mharness{os.Getenv("MUT")})
}
