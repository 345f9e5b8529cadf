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
	r := &running{claim: &core.Claim{Queue: "q"}}
	r.ctx.init(context.WithValue(context.Background(), key{}, 7), r)
	cancel := r.cancel
	defer cancel(nil)
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

// A listener's context cancelled before anything looked at it reads as a cancel context
// cancelled then: Err, Cause, a closed Done, and derived contexts born cancelled with the
// cause; the first cause wins, and nil reads as context.Canceled.
func TestListenerCtxCancelledFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		causes []error
		want   error
	}{
		{"lease lost", []error{core.ErrLeaseLost, core.ErrRunTimeout}, core.ErrLeaseLost},
		{"nil cause", []error{nil, core.ErrLeaseLost}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &running{claim: &core.Claim{Queue: "q"}}
			r.ctx.init(context.Background(), r)
			var ctx context.Context = &r.ctx
			if ctx.Err() != nil || r.ctx.cause() != nil {
				t.Fatalf("before cancel: Err %v, cause %v; want nil", ctx.Err(), r.ctx.cause())
			}
			for _, c := range tc.causes {
				r.cancel(c)
			}
			if r.ctx.made.Load() {
				t.Fatal("cancel made the cancel context; want it made only on demand")
			}
			if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(r.ctx.cause(), tc.want) {
				t.Fatalf("unmade: Err %v, cause %v; want Canceled and %v", ctx.Err(), r.ctx.cause(), tc.want)
			}
			child, stop := context.WithCancel(ctx)
			defer stop()
			for name, c := range map[string]context.Context{"listener": ctx, "derived": child} {
				select {
				case <-c.Done():
				default:
					t.Fatalf("%s: Done not closed after the cancel", name)
				}
				if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), tc.want) {
					t.Errorf("%s: Err %v, Cause %v; want Canceled and %v", name, c.Err(), context.Cause(c), tc.want)
				}
			}
		})
	}
}

// Cancels racing the first Done from several goroutines end with one closed Done and one
// cause (go test -race).
func TestListenerCtxRace(t *testing.T) {
	t.Parallel()
	for range 100 {
		r := &running{claim: &core.Claim{Queue: "q"}}
		r.ctx.init(context.Background(), r)
		var ctx context.Context = &r.ctx
		start := make(chan struct{})
		got := make(chan (<-chan struct{}), 2)
		for range 2 {
			go func() {
				<-start
				got <- ctx.Done()
			}()
		}
		go func() {
			<-start
			r.cancel(core.ErrLeaseLost)
		}()
		close(start)
		a, b := <-got, <-got
		if a != b {
			t.Fatal("two Done channels for one context")
		}
		<-a
		if !errors.Is(context.Cause(ctx), core.ErrLeaseLost) || !errors.Is(r.ctx.cause(), core.ErrLeaseLost) {
			t.Fatalf("Cause %v / %v; want ErrLeaseLost", context.Cause(ctx), r.ctx.cause())
		}
	}
}
