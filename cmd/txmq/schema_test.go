package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestOneSchemaSetting opens an app the way a user configures one (TXMQ_BACKEND=postgres://,
// TXMQ_DATABASE_URL, TXMQ_SCHEMA) and checks, in the database and with the built txmq command
// given the same settings, that every txmq table (outbox, dead letters, jobs) is in that one
// schema. It sets the environment, so it does not run in parallel.
func TestOneSchemaSetting(t *testing.T) {
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	pgURL := testenv.PostgresURL(t)
	bin := buildBinary(t)
	t.Setenv("TXMQ_BACKEND", pgURL)
	t.Setenv("TXMQ_DATABASE_URL", pgURL)
	t.Setenv("TXMQ_SCHEMA", schema)
	t.Setenv("TXMQ_DRAIN_BACKENDS", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg, err := txmq.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	reg := txmq.NewRegistry()
	queue := testenv.UniqueName("schema_")
	q := txmq.MustDeclareIn(reg, queue, txmq.QueueConfig[string]{Transactional: txmq.Never})
	cfg.Node.Registry = reg
	app, err := txmq.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, app.Node, "later", txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := app.Close(ctx); err != nil { // drains the publish buffer into the jobs table
		t.Fatal(err)
	}

	// The database: the three tables are in the schema, and the batch is in its jobs table.
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'txmq\_%' ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	got := strings.Join(tables, " ")
	for _, want := range []string{"txmq_dead_letters", "txmq_jobs", "txmq_outbox"} {
		if !strings.Contains(got, want) {
			t.Errorf("schema %s holds %q, missing %s", schema, got, want)
		}
	}
	if strings.Contains(got, "txmq_jobs") {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".txmq_jobs WHERE queue = $1`, queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s.txmq_jobs holds %d batch(es) of queue %s, want 1", schema, n, queue)
		}
	}

	// The command line with the same settings (only the environment) sees the same schema.
	cmd := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = os.Environ()
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("txmq %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := cmd("migrate")
	for _, want := range []string{`outbox: schema "` + schema + `"`, `sqljobs: schema "` + schema + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("txmq migrate printed:\n%s\nwant %s", out, want)
		}
	}
	out = cmd("status", "--queue", queue, "--json")
	if !strings.Contains(out, `"delayed": 1`) {
		t.Errorf("txmq status --queue %s --json printed:\n%s\nwant the delayed batch (\"delayed\": 1)", queue, out)
	}
}

// TestSchemaConflict: TXMQ_SCHEMA and the postgres:// URL's own txmq_schema naming different
// schemas is an error naming both, in the library and in every command (a usage error, exit 2).
func TestSchemaConflict(t *testing.T) {
	pgURL := testenv.PostgresURL(t) + "&txmq_schema=jobs_here"
	if !strings.Contains(pgURL, "?") {
		pgURL = strings.Replace(pgURL, "&", "?", 1)
	}
	bin := buildBinary(t)
	t.Setenv("TXMQ_BACKEND", pgURL)
	t.Setenv("TXMQ_DATABASE_URL", testenv.PostgresURL(t))
	t.Setenv("TXMQ_SCHEMA", "outbox_here")
	t.Setenv("TXMQ_DRAIN_BACKENDS", "")
	_, err := txmq.ConfigFromEnv()
	if err == nil || !strings.Contains(err.Error(), `TXMQ_SCHEMA="outbox_here"`) || !strings.Contains(err.Error(), `txmq_schema="jobs_here"`) {
		t.Fatalf("ConfigFromEnv: %v, want an error naming both schemas", err)
	}
	for _, args := range [][]string{{"migrate"}, {"status", "--queue", "a"}, {"dlq", "ls"}, {"bench", "--messages", "5"}} {
		c := exec.Command(bin, args...)
		c.Env = os.Environ()
		out, _ := c.CombinedOutput()
		if c.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "outbox_here") || !strings.Contains(string(out), "jobs_here") {
			t.Errorf("txmq %s: exit %d\n%s\nwant exit %d naming both schemas", strings.Join(args, " "), c.ProcessState.ExitCode(), out, exitUsage)
		}
	}
}
