package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
)

// TestReconnectLosesClaims: a claim pulled before the connection was re-established is lost
// (a restarted server may have handed it out again, and JetStream would accept the old
// holder's acknowledgements): Extend and every settle return core.ErrLeaseLost, and a claim
// pulled after the reconnect holds.
func TestReconnectLosesClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := openBackend(t, natstest.NATSURL(t), nil)
	publishN(t, be, "q", 2)
	lease := 10 * time.Second
	before := fetchN(t, be, 1, lease, one("q"))[0]
	if err := be.Extend(ctx, before, lease); err != nil {
		t.Fatalf("extend before the reconnect: %v", err)
	}
	reconnects := be.nc.Stats().Reconnects
	if err := be.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reconnected", func() bool { return be.nc.Stats().Reconnects > reconnects && be.nc.IsConnected() })
	for name, op := range map[string]func() error{
		"extend": func() error { return be.Extend(ctx, before, lease) },
		"ack":    func() error { return be.Ack(ctx, before) },
		"retry":  func() error { return be.Retry(ctx, before, nil, 0) },
		"drop":   func() error { return be.Drop(ctx, before, core.ReasonDeliveryExhausted) },
	} {
		if err := op(); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("%s of a claim pulled before the reconnect: %v, want ErrLeaseLost", name, err)
		}
	}
	after := fetchN(t, be, 1, lease, one("q"))[0]
	if err := be.Extend(ctx, after, lease); err != nil {
		t.Fatalf("extend of a claim pulled after the reconnect: %v", err)
	}
	if err := be.Ack(ctx, after); err != nil {
		t.Fatalf("ack of a claim pulled after the reconnect: %v", err)
	}
}
