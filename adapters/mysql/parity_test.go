package mysql

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
)

// TestParity runs the shared conformance suite against the real MySQL/MariaDB server
// (TXMQ_MYSQL_URL): each property gets a database of its own and its own TCP proxy in front
// of the server; every client (node) gets its own *sql.DB through that proxy, so nodes are as
// separate as processes (a publish wakes only its own Backend's fetches, the others poll),
// and Break cuts them all. The transaction properties run the outbox on PostgreSQL in front
// of this backend (parity.Options.PostgresURL's default), as for every non-PostgreSQL
// backend: the outbox on MySQL is not part of this package.
//
// Its subtests run one after the other: jobs, the suite described here, and appdb, the
// outbox in the app database too (parityAppDB).
func TestParity(t *testing.T) {
	t.Run("jobs", func(t *testing.T) { parity.Run(t, parityHarness{}) })
	t.Run("appdb", func(t *testing.T) { parityAppDB(t) })
}

type parityHarness struct{}

func (parityHarness) Name() string { return "mysql" }

// Capabilities: leases of 2 s. The suite runs against the machine's MariaDB, a server beside
// the test process that a loaded machine slows as much as the test: under stress-ng --cpu 2
// its lease extensions of a 1 s lease missed the fence (250 ms) often enough to fail five or
// more properties a run (counts of runs, a contract client's Ack), where 2 s leases (as for
// SQLite and NATS) hold.
func (parityHarness) Capabilities() parity.Caps {
	return parity.Caps{Lease: 2 * time.Second, PollWait: 200 * time.Millisecond}
}

func (parityHarness) Open(t *testing.T) parity.Env {
	w := newWorld(t)
	host := w.u.Host
	if w.u.Port() == "" {
		host = net.JoinHostPort(w.u.Hostname(), defaultPort)
	}
	return &parityEnv{w: w, proxy: parity.NewProxy(t, host)}
}

type parityEnv struct {
	w     *world
	proxy *parity.Proxy
}

func (e *parityEnv) Backend(t *testing.T) core.Backend {
	be, err := New(context.Background(), dbAt(t, e.w.u, e.proxy.Addr()), &Options{
		Schema:       e.w.schema,
		QueryTimeout: 3 * time.Second,
		ReapInterval: -1,
		Logger:       txmqtest.DiscardLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func (e *parityEnv) Break(*testing.T)   { e.proxy.Break() }
func (e *parityEnv) Restore(*testing.T) { e.proxy.Restore() }
