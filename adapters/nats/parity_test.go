package nats

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

func TestParity(t *testing.T) { parity.Run(t, natsHarness{}) }

// natsHarness runs the suite against a real JetStream server (the embedded v2.15 server, or
// TXMQ_NATS_URL). Each property gets its own stream prefix and its own TCP proxy in front of
// the server, so Break (the proxy cuts every connection and refuses new ones) is an outage of
// that property's clients only, while the other properties keep running on the same server.
type natsHarness struct{}

func (natsHarness) Name() string { return "nats" }

// Capabilities: a lease of 2 s, as the cluster suite's. A stashed claim is handed out while
// at least half its lease is left, which at the default 1 s left a raw client 500 ms to
// settle it: a loaded CI machine took longer (contract/cancelled_fetch_loses_nothing saw its
// Ack refused as lease lost at load 18 on 2 cores).
func (natsHarness) Capabilities() parity.Caps {
	return parity.Caps{MaxMessageSize: 1 << 20, Lease: 2 * time.Second}
}

func (natsHarness) Open(t *testing.T) parity.Env {
	raw := natstest.NATSURL(t)
	u, err := url.Parse(strings.Split(raw, ",")[0])
	if err != nil {
		t.Fatalf("NATS URL: %v", err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	pu := url.URL{Scheme: "nats", User: u.User, Host: proxy.Addr()}
	e := &natsEnv{url: pu.String(), direct: raw, prefix: testenv.UniqueName("p"), proxy: proxy}
	t.Cleanup(func() { deleteStreams(t, e.direct, e.prefix) })
	return e
}

type natsEnv struct {
	url, direct, prefix string
	proxy               *testenv.Proxy
}

func (e *natsEnv) Backend(t *testing.T) core.Backend {
	be, err := New(e.url, &Options{Prefix: e.prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("nats.New: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

func (e *natsEnv) Break(*testing.T)   { e.proxy.Break() }
func (e *natsEnv) Restore(*testing.T) { e.proxy.Restore() }

// deleteStreams removes every stream named prefix_*, so properties leave nothing behind.
func deleteStreams(t testing.TB, rawURL, prefix string) {
	be, err := New(rawURL, nil)
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer be.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := be.js.StreamNames(ctx, jetstream.WithStreamListSubject(prefix+".>"))
	var del []string
	for n := range names.Name() {
		if strings.HasPrefix(n, prefix+"_") {
			del = append(del, n)
		}
	}
	for _, n := range del {
		_ = be.js.DeleteStream(ctx, n)
	}
}
