package ledger

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// newTestLedger migrates o (in a fresh schema of the test database) and opens a Ledger on it,
// closed when the test ends.
func newTestLedger(t *testing.T, o *Options) (*Ledger, *pgxpool.Pool) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	o.Schema = testenv.PostgresSchema(t, pool)
	if err := Migrate(context.Background(), pool, o); err != nil {
		t.Fatal(err)
	}
	l, err := New(pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l, pool
}
