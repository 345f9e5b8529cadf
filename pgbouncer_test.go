package txmq_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestOpenBehindPgBouncer: an app whose backend (sqljobs) and app database both go through
// PgBouncer in transaction pooling mode, written the way docs/adapters.md says: txmq_pgbouncer=true
// on both URLs, and the direct server as txmq_listen_url of the database URL. RunInTx
// publishes through the outbox and a listener receives the messages.
func TestOpenBehindPgBouncer(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	bouncer := testenv.PgBouncerURL(t)
	direct := testenv.PostgresURL(t)
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "bounced", txmq.QueueConfig[int]{Transactional: txmq.Require})
	app, err := txmq.Open(context.Background(), &txmq.Config{
		Backend:     testenv.WithParams(t, bouncer, "txmq_pgbouncer", "true", "txmq_schema", schema),
		DatabaseURL: testenv.WithParams(t, bouncer, "txmq_pgbouncer", "true", "txmq_listen_url", direct),
		Schema:      schema,
		Logger:      txmqtest.DiscardLogger(),
		Node:        txmq.NodeOptions{Registry: reg},
	})
	if err != nil {
		t.Fatalf("Open behind PgBouncer: %v", err)
	}
	defer app.Close(context.Background())
	var (
		mu  sync.Mutex
		got []int
	)
	if err := q.Listen(app.Node, func(_ context.Context, msgs []int) error {
		mu.Lock()
		got = append(got, msgs...)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := app.RunInTx(context.Background(), func(ctx context.Context, _ pgx.Tx) error { return q.Publish(ctx, app.Node, i) }); err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, 0) && slices.Contains(got, 1) && slices.Contains(got, 2)
	}, "the listener receiving the 3 messages published through PgBouncer")
}

// TestDatabaseURLPgBouncerParams: the app database URL's txmq_ parameters are checked by
// Validate, with the setting named and the password left out.
func TestDatabaseURLPgBouncerParams(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url     string
		wantErr string
	}{
		{url: "postgres://u:pw@h:6432/db?txmq_pgbouncer=true"},
		{url: "postgres://u:pw@h:6432/db?txmq_pgbouncer=true&txmq_poll_interval=1s&txmq_listen_url=" + url.QueryEscape("postgres://u:pw@h:5432/db")},
		{url: "postgres://u:pw@h:6432/db?txmq_pgbouncer=true&default_query_exec_mode=describe_exec", wantErr: "cannot work through PgBouncer"},
		{url: "postgres://u:pw@h:6432/db?txmq_pgbouncer=sure", wantErr: "txmq_pgbouncer"},
		{url: "postgres://u:pw@h:6432/db?txmq_poll_interval=0s", wantErr: "txmq_poll_interval"},
	} {
		err := (&txmq.Config{Backend: "memory://", DatabaseURL: tt.url}).Validate()
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("Validate(%s) = %v", tt.url, err)
			}
			continue
		}
		if !errors.Is(err, txmq.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "TXMQ_DATABASE_URL") || strings.Contains(err.Error(), "pw@") {
			t.Errorf("Validate(%s) = %v; want ErrInvalidConfig naming TXMQ_DATABASE_URL and %q, without the password", tt.url, err, tt.wantErr)
		}
	}
}
