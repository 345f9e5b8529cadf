package sqljobs

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestParity runs the shared conformance suite against the real Postgres, in each way a
// node can reach it, one after the other (run side by side, the three suites made the
// package longer on a CI machine whose cores were busy: the suites share the CPU, not just
// time):
//
//   - direct: each property gets its own schema and its own TCP proxy in front of the
//     server; every client (node) gets its own pool through that proxy, so nodes are as
//     separate as processes, and Break cuts them all.
//   - session_guard: the same with every node's pool carrying the plan guard per session
//     (SessionPlanGuard, as Open's pool does): statements go without a guard of their own.
//   - pgbouncer: through PgBouncer in transaction pooling mode (parityPgBouncer).
func TestParity(t *testing.T) {
	t.Run("direct", func(t *testing.T) { parity.Run(t, parityHarness{}) })
	t.Run("session_guard", func(t *testing.T) { parity.Run(t, parityHarness{session: true}) })
	t.Run("pgbouncer", func(t *testing.T) { parityPgBouncer(t) })
}

// parityHarness opens sqljobs nodes; session gives their pools SessionPlanGuard.
type parityHarness struct{ session bool }

func (h parityHarness) Name() string {
	if h.session {
		return "sqljobs-session"
	}
	return "sqljobs"
}

func (parityHarness) Capabilities() parity.Caps {
	return parity.Caps{Lease: time.Second, PollWait: 200 * time.Millisecond}
}

func (h parityHarness) Open(t *testing.T) parity.Env {
	raw := testenv.PostgresURL(t)
	admin := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, admin)
	if err := Migrate(context.Background(), admin, &Options{Schema: schema}); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	proxy := testenv.NewProxy(t, host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return &parityEnv{url: u.String(), schema: schema, proxy: proxy, session: h.session}
}

type parityEnv struct {
	url     string
	schema  string
	proxy   *testenv.Proxy
	session bool
}

func (e *parityEnv) Backend(t *testing.T) core.Backend {
	var pool *pgxpool.Pool
	if e.session {
		pool = sessionPoolFor(t, e.url)
	} else {
		pool = poolFor(t, e.url, nil)
	}
	be, err := New(context.Background(), pool, &Options{
		Schema:       e.schema,
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

func (e *parityEnv) Break(t *testing.T)   { e.proxy.Break() }
func (e *parityEnv) Restore(t *testing.T) { e.proxy.Restore() }

// sessionPoolFor is poolFor with SessionPlanGuard.
func sessionPoolFor(t testing.TB, rawURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	SessionPlanGuard(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
