package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// A listener's context carries its claim under leaseKey{}, other values from its parent, and
// its cancel cause to itself and to contexts derived from it.
func TestListenerCtx(t *testing.T) {
	t.Parallel()
	type key struct{}
	cctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, 7))
	defer cancel(nil)
	r := &running{claim: &core.Claim{Queue: "q"}}
	r.ctx = listenerCtx{Context: cctx, r: r}
	var ctx context.Context = &r.ctx
	if got, _ := ctx.Value(leaseKey{}).(*running); got != r {
		t.Fatalf("Value(leaseKey{}) = %v, want the claim's running", got)
	}
	if got := ctx.Value(key{}); got != 7 {
		t.Fatalf("Value(key{}) = %v, want the parent's 7", got)
	}
	child, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	cancel(core.ErrLeaseLost)
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a derived context was not cancelled with the listener's")
	}
	for name, c := range map[string]context.Context{"listener": ctx, "derived": child} {
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), core.ErrLeaseLost) {
			t.Errorf("%s: Err %v, Cause %v; want Canceled and ErrLeaseLost", name, c.Err(), context.Cause(c))
		}
	}
}
