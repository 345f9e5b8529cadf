package txmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestConfigSchemaConflict: Schema and a postgres:// Backend's txmq_schema naming different
// schemas is an invalid configuration naming both; agreeing ones and other schemes are fine.
func TestConfigSchemaConflict(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg     txmq.Config
		wantErr bool
	}{
		{txmq.Config{Schema: "a", Backend: "postgres://u:pw@h/db?txmq_schema=b"}, true},
		{txmq.Config{Schema: "a", Backend: "postgresql://h/db?txmq_schema=a"}, false},
		{txmq.Config{Schema: "a", Backend: "postgres://h/db"}, false},
		{txmq.Config{Backend: "postgres://h/db?txmq_schema=b"}, false},
		{txmq.Config{Schema: "a", Backend: "redis://127.0.0.1:6379/0?txmq_prefix=b"}, false},
	} {
		err := tt.cfg.Validate()
		if (err != nil) != tt.wantErr {
			t.Errorf("%+v: Validate() = %v, want error %v", tt.cfg, err, tt.wantErr)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, txmq.ErrInvalidConfig) || !strings.Contains(err.Error(), `TXMQ_SCHEMA="a"`) || !strings.Contains(err.Error(), `txmq_schema="b"`) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Validate() = %v, want ErrInvalidConfig naming both schemas, without the password", err)
		}
	}
}

// TestOpenSchemaFromBackendURL: with only the postgres:// URL's txmq_schema, the outbox and
// dead letters go to that schema too.
func TestOpenSchemaFromBackendURL(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	pgURL := testenv.PostgresURL(t)
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: pgURL + "&txmq_schema=" + schema, DatabaseURL: pgURL, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = app.Close(context.Background()) }()
	if got := app.Store.Schema(); got != schema {
		t.Errorf("outbox schema %q, want the backend URL's %q", got, schema)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('txmq_jobs', 'txmq_outbox', 'txmq_dead_letters')`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d of txmq_jobs, txmq_outbox, txmq_dead_letters in schema %s, want 3", n, schema)
	}
}
