package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	publish(t, be, "q", "b1", time.Time{})
	for want := 1; want <= 3; want++ {
		cs := fetch(t, be, all("q"))
		if len(cs) != 1 || cs[0].Deliveries != want {
			t.Fatalf("handout %d: got %+v, want one claim with Deliveries %d", want, cs, want)
		}
		if !cs[0].LeaseUntil.Equal(clk.Now().Add(10 * time.Second)) {
			t.Fatalf("LeaseUntil = %v, want now+10s", cs[0].LeaseUntil)
		}
		clk.Advance(10*time.Second - time.Nanosecond)
		if n := len(fetch(t, be, all("q"))); n != 0 {
			t.Fatalf("claimed %d before the lease ended", n)
		}
		if d := depth(t, be, "q"); d != (core.Depth{InFlight: 1}) {
			t.Fatalf("depth under lease = %+v", d)
		}
		clk.Advance(time.Nanosecond)
		if d := depth(t, be, "q"); d != (core.Depth{Ready: 1}) {
			t.Fatalf("depth after lease end = %+v, want 1 ready", d)
		}
	}
}

func TestLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := map[string]func(be *Backend, c *core.Claim) error{
		"ack":    func(be *Backend, c *core.Claim) error { return be.Ack(ctx, c) },
		"drop":   func(be *Backend, c *core.Claim) error { return be.Drop(ctx, c, core.ReasonWorkerLost) },
		"retry":  func(be *Backend, c *core.Claim) error { return be.Retry(ctx, c, []byte("v2"), 0) },
		"extend": func(be *Backend, c *core.Claim) error { return be.Extend(ctx, c, time.Minute) },
	}
	for name, op := range ops {
		for _, reclaimed := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/expired", true: "/expired and reclaimed"}[reclaimed], func(t *testing.T) {
				t.Parallel()
				be, clk := newFake(t)
				publish(t, be, "q", "b1", time.Time{})
				stale := fetch(t, be, one("q"))[0]
				clk.Advance(10 * time.Second)
				var current *core.Claim
				if reclaimed {
					current = fetch(t, be, one("q"))[0]
				}
				if err := op(be, stale); !errors.Is(err, core.ErrLeaseLost) {
					t.Fatalf("%s on a lost lease: %v, want ErrLeaseLost", name, err)
				}
				if err := op(be, stale); !errors.Is(err, core.ErrLeaseLost) {
					t.Fatalf("second %s on a lost lease: %v, want ErrLeaseLost", name, err)
				}
				want := core.Depth{Ready: 1}
				if reclaimed {
					if err := be.Ack(ctx, current); err != nil {
						t.Fatalf("current holder's ack: %v", err)
					}
					want = core.Depth{}
				}
				if d := depth(t, be, "q"); d != want {
					t.Fatalf("depth = %+v, want %+v: the stale settle must not touch the batch", d, want)
				}
			})
		}
	}
}

func TestExtend(t *testing.T) {
	t.Parallel()
	be, clk := newFake(t)
	publish(t, be, "q", "b1", time.Time{})
	c := fetch(t, be, one("q"))[0]
	clk.Advance(9 * time.Second)
	must(t, be.Extend(context.Background(), c, 30*time.Second))
	if want := clk.Now().Add(30 * time.Second); !c.LeaseUntil.Equal(want) {
		t.Fatalf("LeaseUntil = %v, want %v", c.LeaseUntil, want)
	}
	clk.Advance(29 * time.Second) // well past the first lease
	if n := len(fetch(t, be, one("q"))); n != 0 {
		t.Fatalf("extended claim handed out again (%d)", n)
	}
	must(t, be.Ack(context.Background(), c))
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth after ack = %+v", d)
	}
}

func TestRetryRewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name           string
		body           []byte
		delay          time.Duration
		wantBody       string
		wantDeliveries int
	}{
		{name: "rewrite with delay", body: []byte("v2"), delay: 5 * time.Second, wantBody: "v2", wantDeliveries: 1},
		{name: "rewrite now", body: []byte("v2"), wantBody: "v2", wantDeliveries: 1},
		{name: "nil body retries in place", delay: time.Second, wantBody: "body-b1", wantDeliveries: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be, clk := newFake(t)
			publish(t, be, "q", "b1", time.Time{})
			_ = fetch(t, be, one("q"))[0]
			clk.Advance(10 * time.Second) // lose the lease once: Deliveries 2 next
			c := fetch(t, be, one("q"))[0]
			if c.Deliveries != 2 {
				t.Fatalf("Deliveries = %d, want 2", c.Deliveries)
			}
			body := tt.body
			must(t, be.Retry(ctx, c, body, tt.delay))
			if body != nil {
				body[0] = 'X' // the backend kept its own copy
			}
			if tt.delay > 0 {
				if d := depth(t, be, "q"); d != (core.Depth{Delayed: 1}) {
					t.Fatalf("depth after retry = %+v, want 1 delayed", d)
				}
				clk.Advance(tt.delay - time.Nanosecond)
				if n := len(fetch(t, be, one("q"))); n != 0 {
					t.Fatal("retried batch claimable before its delay")
				}
				clk.Advance(time.Nanosecond)
			}
			cs := fetch(t, be, one("q"))
			if len(cs) != 1 {
				t.Fatalf("claimed %d after the delay, want 1", len(cs))
			}
			if string(cs[0].Body) != tt.wantBody || cs[0].Deliveries != tt.wantDeliveries {
				t.Fatalf("got body %q Deliveries %d, want %q %d", cs[0].Body, cs[0].Deliveries, tt.wantBody, tt.wantDeliveries)
			}
		})
	}
}

func TestForeignClaim(t *testing.T) {
	t.Parallel()
	a, b := newReal(t), newReal(t)
	publish(t, a, "q", "b1", time.Time{})
	c := fetch(t, a, one("q"))[0]
	for _, claim := range []*core.Claim{c, nil, {Queue: "q", ID: "made-up"}} {
		if err := b.Ack(context.Background(), claim); !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("ack of a foreign claim %+v: %v, want ErrInvalidConfig", claim, err)
		}
	}
}
