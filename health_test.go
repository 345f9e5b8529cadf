package txmq_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// check returns the named check of h, failing the test when it is missing.
func check(t *testing.T, h txmq.Health, name string) txmq.HealthCheck {
	t.Helper()
	for _, c := range h.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, h)
	return txmq.HealthCheck{}
}

func TestNodeHealth(t *testing.T) {
	t.Parallel()
	k := txmqtest.New(t, nil)
	q := txmqtest.DeclareIn(k, "health", txmq.QueueConfig[int]{Transactional: txmq.Try})
	n := k.Node(&txmq.NodeOptions{PollWait: 50 * time.Millisecond})
	if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	opts := &txmq.HealthOptions{DriverStall: 300 * time.Millisecond, Timeout: 500 * time.Millisecond, MaxBuffered: 5}
	ctx := context.Background()
	txmqtest.Eventually(t, 5*time.Second, func() bool { return n.Live(opts).OK && n.Ready(ctx, opts).OK }, "a started node is live and ready")

	// The backend down: ready fails on the backend check, live still holds.
	k.Memory.Break()
	h := n.Ready(ctx, opts)
	if c := check(t, h, "backend"); h.OK || c.OK || !strings.Contains(c.Detail, "unavailable") {
		t.Fatalf("Ready with the backend broken = %+v; want the backend check failing", h)
	}
	// Messages pile up in the buffer while the backend refuses them (no outbox here, so the
	// flushes drop them; publish faster than that with a long window).
	k.Memory.Restore()

	// A stuck driver (Freeze stops its loop): not live once DriverStall passed.
	txmqtest.Freeze(n)
	txmqtest.Eventually(t, 5*time.Second, func() bool { return !n.Live(opts).OK }, "a frozen driver is reported stuck: %+v", n.Live(opts))
	if c := check(t, n.Live(opts), "driver"); !strings.Contains(c.Detail, "stuck") {
		t.Fatalf("driver check = %+v; want it to say the driver is stuck", c)
	}
	txmqtest.Thaw(n)
	txmqtest.Eventually(t, 5*time.Second, func() bool { return n.Live(opts).OK }, "a thawed driver is live again")
}

func TestNodeHealthBuffer(t *testing.T) {
	t.Parallel()
	k := txmqtest.New(t, nil)
	q := txmqtest.DeclareIn(k, "healthbuf", txmq.QueueConfig[int]{Transactional: txmq.Try})
	n := k.Node(&txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	for i := range 10 {
		if err := q.Publish(context.Background(), n, i); err != nil {
			t.Fatal(err)
		}
	}
	h := n.Ready(context.Background(), &txmq.HealthOptions{MaxBuffered: 5})
	if c := check(t, h, "buffer"); h.OK || c.OK || !strings.Contains(c.Detail, "MaxBuffered") {
		t.Fatalf("Ready with 10 buffered messages and MaxBuffered 5 = %+v; want the buffer check failing", h)
	}
	if h := n.Ready(context.Background(), &txmq.HealthOptions{MaxBuffered: -1}); !h.OK {
		t.Fatalf("Ready with the buffer check off = %+v; want OK", h)
	}
}

func TestAppHealthHandler(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "healthtx", txmq.QueueConfig[int]{Transactional: txmq.Require})
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if err := app.Node.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.HealthHandler(nil))
	defer srv.Close()
	for _, path := range []string{"/livez", "/readyz"} {
		txmqtest.Eventually(t, 5*time.Second, func() bool {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var h txmq.Health
			if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return resp.StatusCode == http.StatusOK && h.OK
		}, path+" answers 200 with an OK report")
	}
	h := app.Ready(context.Background(), nil)
	if c := check(t, h, "database"); !c.OK {
		t.Fatalf("database check = %+v", c)
	}
	if c := check(t, h, "outbox"); !c.OK || !strings.Contains(c.Detail, "0 rows") {
		t.Fatalf("outbox check = %+v; want 0 rows waiting", c)
	}
	// An outbox over its threshold makes /readyz answer 503: with the backend down, committed
	// rows stay in the outbox.
	app.Backend.(*memory.Backend).Break()
	for i := range 2 {
		if err := app.RunInTx(context.Background(), func(ctx context.Context, _ pgx.Tx) error { return q.Publish(ctx, app.Node, i) }); err != nil {
			t.Fatal(err)
		}
	}
	srv2 := httptest.NewServer(app.HealthHandler(&txmq.HealthOptions{MaxOutbox: 1, MaxBuffered: -1}))
	defer srv2.Close()
	resp, err := http.Get(srv2.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var got txmq.Health
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || check(t, got, "outbox").OK {
		t.Fatalf("/readyz with 2 outbox rows and MaxOutbox 1: %d %+v (%v); want 503 with the outbox check failing", resp.StatusCode, got, err)
	}
}
