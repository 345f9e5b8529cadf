package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresPool returns a pool on PostgresURL(t), closed in t.Cleanup.
func PostgresPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("testenv: pgxpool.New(%s): %v", redact(u), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// PostgresSchema returns a new unique schema name ("txmq_t_" + random hex) for one test and
// drops that schema (CASCADE) in t.Cleanup. It does not create the schema: migrations do.
// Register it after PostgresPool so the drop runs before the pool closes.
func PostgresSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := UniqueName("txmq_t_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("testenv: dropping schema %s: %v", name, err)
		}
	})
	return name
}

// PostgresPoolAt returns a pool on u, closed in t.Cleanup, after checking once per process
// that u answers; otherwise it skips or fails t (see Required). setting names where u came
// from, for the message (for example "parity.Options.PostgresURL").
func PostgresPoolAt(t testing.TB, u, setting string) *pgxpool.Pool {
	t.Helper()
	Check(t, "PostgreSQL", setting, u, pingPostgres)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("testenv: pgxpool.New(%s): %v", redact(u), err)
	}
	t.Cleanup(pool.Close)
	return pool
}
