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

// parityPgBouncer runs the shared conformance suite through PgBouncer in transaction
// pooling mode (TXMQ_PGBOUNCER_URL), the way a user writes it: a backend URL with
// txmq_pgbouncer=true and no txmq_listen_url, so every statement runs in exec mode (no named
// prepared statements) and waiting fetches poll, since LISTEN cannot work through the pooler.
// Each property gets its own schema, migrated through PgBouncer too, and its own TCP proxy in
// front of PgBouncer, which Break cuts.
func parityPgBouncer(t *testing.T) { parity.Run(t, pgbouncerHarness{}) }

type pgbouncerHarness struct{}

func (pgbouncerHarness) Name() string { return "sqljobs-pgbouncer" }

func (pgbouncerHarness) Capabilities() parity.Caps {
	return parity.Caps{Lease: time.Second, PollWait: 200 * time.Millisecond}
}

func (pgbouncerHarness) Open(t *testing.T) parity.Env {
	raw := testenv.PgBouncerURL(t)
	admin := testenv.PostgresPool(t) // direct: drops the schema at the end
	schema := testenv.PostgresSchema(t, admin)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "6432")
	}
	q := u.Query()
	q.Set("txmq_pgbouncer", "true")
	q.Set("txmq_schema", schema)
	u.RawQuery = q.Encode()
	opts, _, cfg, err := parseConfig(u)
	if err != nil {
		t.Fatalf("parseConfig(%s): %v", core.RedactURL(u), err)
	}
	if !opts.polls() {
		t.Fatalf("txmq_pgbouncer=true without txmq_listen_url: Options %+v should poll", opts)
	}
	mig, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close()
	if err := Migrate(context.Background(), mig, opts); err != nil {
		t.Fatalf("Migrate through PgBouncer: %v", err)
	}
	proxy := testenv.NewProxy(t, host)
	u.Host = proxy.Addr()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return &pgbouncerEnv{url: u, proxy: proxy}
}

type pgbouncerEnv struct {
	url   *url.URL
	proxy *testenv.Proxy
}

func (e *pgbouncerEnv) Backend(t *testing.T) core.Backend {
	opts, _, cfg, err := parseConfig(e.url)
	if err != nil {
		t.Fatalf("parseConfig: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	opts.QueryTimeout = 3 * time.Second
	opts.ReapInterval = -1
	opts.Logger = txmqtest.DiscardLogger()
	be, err := New(context.Background(), pool, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func (e *pgbouncerEnv) Break(t *testing.T)   { e.proxy.Break() }
func (e *pgbouncerEnv) Restore(t *testing.T) { e.proxy.Restore() }
