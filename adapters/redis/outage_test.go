package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// newProxiedBackend returns a Backend that reaches the test server through a proxy, with short
// timeouts so an outage shows quickly.
func newProxiedBackend(t *testing.T) (*Backend, *testenv.Proxy) {
	t.Helper()
	proxy := testenv.NewProxy(t, testAddr(t))
	be := newTestBackend(t, "", func(o *Options) {
		o.Addr = proxy.Addr()
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond
	})
	return be, proxy
}

func TestOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be, proxy := newProxiedBackend(t)
	publish(t, be, "q", "before", time.Time{})
	held := fetch(t, be, one("q"))[0]

	proxy.Break()
	start := time.Now()
	err := be.Publish(ctx, core.OutgoingBatch{ID: "lost", Queue: "q", Body: []byte("x")})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish through a broken proxy: %v, want ErrBackendUnavailable", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("publish took %v to fail", el)
	}
	t.Logf("publish failed after %v", time.Since(start))
	start = time.Now()
	_, err = be.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: time.Second})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("fetch through a broken proxy: %v, want ErrBackendUnavailable", err)
	}
	t.Logf("fetch failed after %v", time.Since(start))
	if err := be.Ack(ctx, held); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("ack through a broken proxy: %v, want ErrBackendUnavailable", err)
	}
	if _, err := be.Depths(ctx, []string{"q"}); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("depths through a broken proxy: %v, want ErrBackendUnavailable", err)
	}

	proxy.Restore()
	start = time.Now()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = be.Ack(ctx, held) // the failed ack did not settle: it works now
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("ack after restore: %v", err)
	}
	t.Logf("ack worked %v after restore", time.Since(start))
	publish(t, be, "q", "after", time.Time{})
	if d := depth(t, be, "q"); d != (core.Depth{Ready: 1}) {
		t.Fatalf("depth after restore = %+v, want only the batch published after it", d)
	}
}

// TestWaitingFetchSurvivesOutage: a fetch waiting through a break and restore of its wake-up
// subscription still picks up work published afterwards, quickly.
func TestWaitingFetchSurvivesOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be, proxy := newProxiedBackend(t)
	direct := newTestBackend(t, be.Prefix(), nil)
	req := core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 50 * time.Millisecond}
	if _, err := be.Fetch(ctx, req); err != nil {
		t.Fatal(err)
	}
	proxy.Break()
	time.Sleep(200 * time.Millisecond)
	proxy.Restore()
	time.Sleep(300 * time.Millisecond) // the subscription reconnects
	got := make(chan []*core.Claim, 1)
	go func() {
		for {
			r := req
			r.Wait = 5 * time.Second
			cs, err := be.Fetch(ctx, r)
			if err == nil {
				got <- cs
				return
			}
			time.Sleep(20 * time.Millisecond) // pool connections cut by the break fail once
		}
	}()
	time.Sleep(100 * time.Millisecond)
	sent := time.Now()
	publish(t, direct, "q", "b1", time.Time{})
	select {
	case cs := <-got:
		if len(cs) != 1 {
			t.Fatalf("claimed %d, want 1", len(cs))
		}
		t.Logf("picked up %v after the publish", time.Since(sent))
	case <-time.After(6 * time.Second):
		t.Fatal("the waiting fetch never picked up the publish")
	}
}
