package redis

import (
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
)

// TestParity runs the shared conformance suite against the real Redis, on a single server and
// on a cluster, one after the other (run side by side, the two suites made the package
// longer on a CI machine whose cores were busy: the suites share the CPU, not just time):
//
//   - standalone: each property gets its own key prefix and its own TCP proxy in front of the
//     server; every client (node) is its own Backend with its own go-redis client through
//     that proxy, so nodes are as separate as processes, and Break cuts them all.
//   - cluster: a real Redis Cluster (parityCluster).
func TestParity(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { parity.Run(t, parityHarness{}) })
	t.Run("cluster", func(t *testing.T) { parityCluster(t) })
}

type parityHarness struct{}

func (parityHarness) Name() string { return "redis" }

func (parityHarness) Capabilities() parity.Caps {
	return parity.Caps{Lease: time.Second, PollWait: 200 * time.Millisecond}
}

func (parityHarness) Open(t *testing.T) parity.Env {
	ro := testRedisOptions(t)
	prefix := uniquePrefix(t) // keys deleted in cleanup, straight on the server
	proxy := parity.NewProxy(t, ro.Addr)
	return &parityEnv{prefix: prefix, proxy: proxy, username: ro.Username, password: ro.Password, db: ro.DB}
}

type parityEnv struct {
	prefix             string
	proxy              *parity.Proxy
	username, password string
	db                 int
}

func (e *parityEnv) Backend(t *testing.T) core.Backend {
	be, err := New(&Options{
		Addr: e.proxy.Addr(), Username: e.username, Password: e.password, DB: e.db,
		Prefix:      e.prefix,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
		Logger: txmqtest.DiscardLogger(), GoRedisLogs: true, // no "failed to dial" lines on stderr in the outage cases
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func (e *parityEnv) Break(*testing.T)   { e.proxy.Break() }
func (e *parityEnv) Restore(*testing.T) { e.proxy.Restore() }
