package sqljobs

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestClosedPoolIsUnavailable: a pool closed under the Backend gives errors wrapping
// ErrBackendUnavailable at once.
func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pool := w.pool(nil)
	be := w.backendOn(pool, nil)
	pool.Close()
	start := time.Now()
	err := be.Publish(ctxT(t), core.OutgoingBatch{ID: "x", Queue: "q", Body: []byte("x")})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish on a closed pool: %v", err)
	}
	if _, err := be.Fetch(ctxT(t), core.FetchRequest{Queues: []core.QueueSlots{all("q")}, Wait: time.Second}); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("fetch on a closed pool: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestOutageThroughProxy: with the database cut off (a proxy that drops and refuses
// connections), every call fails quickly with ErrBackendUnavailable; stored batches and
// leases survive, and the same Backend works again after the outage.
func TestOutageThroughProxy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	u, _ := url.Parse(w.url)
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	proxy := testenv.NewProxy(t, host)
	u.Host = proxy.Addr()
	be := w.backendOn(poolFor(t, u.String(), nil), &Options{QueryTimeout: 2 * time.Second})
	publish(t, be, "q", "kept", time.Time{})
	c := fetch(t, be, 10*time.Second, all("q"))
	if len(c) != 1 {
		t.Fatal("no claim")
	}
	proxy.Break()
	start := time.Now()
	calls := map[string]func() error{
		"publish": func() error {
			return be.Publish(context.Background(), core.OutgoingBatch{ID: "lost", Queue: "q", Body: []byte("x")})
		},
		"fetch": func() error {
			_, err := be.Fetch(context.Background(), core.FetchRequest{Queues: []core.QueueSlots{all("q")}, Wait: time.Second})
			return err
		},
		"extend": func() error { return be.Extend(context.Background(), c[0], 10*time.Second) },
		"depths": func() error { _, err := be.Depths(context.Background(), []string{"q"}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, core.ErrBackendUnavailable) {
			t.Fatalf("%s during the outage: %v", name, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("outage errors took %v", d)
	}
	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := be.Ack(context.Background(), c[0])
		if err == nil {
			break
		}
		if !errors.Is(err, core.ErrBackendUnavailable) || time.Now().After(deadline) {
			t.Fatalf("ack after restore: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth after the outage = %+v", d)
	}
}
