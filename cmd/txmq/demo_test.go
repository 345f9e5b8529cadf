package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// demoRow is one row of the demo's summary table.
type demoRow struct {
	published, delivered, failedRuns, deadLetters, replayed string
}

// runDemoSummary runs the demo in-process and returns its output and summary rows by queue.
func runDemoSummary(t *testing.T, args ...string) (string, map[string]demoRow) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append([]string{"demo"}, args...), &out, &errOut); code != exitOK {
		t.Fatalf("txmq demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	rows := map[string]demoRow{}
	_, table, ok := strings.Cut(out.String(), "\nsummary (")
	if !ok {
		t.Fatalf("no summary in:\n%s", out.String())
	}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		n := len(f) // QUEUE, SETTINGS (several words), then five numbers
		rows[f[0]] = demoRow{f[n-5], f[n-4], f[n-3], f[n-2], f[n-1]}
	}
	return out.String(), rows
}

// checkDemo checks every number of the summary and the lines a newcomer reads.
func checkDemo(t *testing.T, out string, rows map[string]demoRow, want map[string]demoRow, lines ...string) {
	t.Helper()
	for q, w := range want {
		if rows[q] != w {
			t.Errorf("summary row %s = %+v, want %+v\n%s", q, rows[q], w, out)
		}
	}
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("the demo's output lacks %q:\n%s", l, out)
		}
	}
	for _, bad := range []string{"map[", "dead letters 0"} {
		if strings.Contains(out, bad) {
			t.Errorf("the demo's output shows %q:\n%s", bad, out)
		}
	}
}

// TestDemoSummary runs the demo without a database and checks the summary's numbers: every
// published message delivered, the poison invoice's 3 failed runs, 1 dead letter, 1 replay,
// Exclusive's max in flight 1, and routing explained as skipped.
func TestDemoSummary(t *testing.T) {
	t.Parallel()
	out, rows := runDemoSummary(t, "-n", "300", "--database-url", "")
	checkDemo(t, out, rows, map[string]demoRow{
		"signups":   {"300", "300", "0", "0", "0"},
		"orders":    {"0", "0", "0", "0", "0"},
		"emails":    {"1", "1", "0", "0", "0"},
		"audit":     {"1", "1", "0", "0", "0"},
		"invoices":  {"1", "1", "3", "1", "1"},
		"reports":   {"6", "6", "0", "0", "0"},
		"reminders": {"1", "1", "0", "0", "0"},
	},
		"2. routing    skipped: Require/Try/Never inside a transaction need an app database (set TXMQ_DATABASE_URL",
		"became a dead letter: reason delivery_exhausted, OnError called once",
		"run as 6 batches of an Exclusive queue: max in flight observed 1",
		"dropped batches: delivery_exhausted=1; OnError calls: 1; max in flight on reports: 1",
	)
}

// TestDemoSummaryWithDatabase runs the demo with an app database (a fresh schema): the
// committed transaction's three messages are delivered, the rolled-back one's never are, and
// the dead letter goes through the dead-letter table and its replay.
func TestDemoSummaryWithDatabase(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	out, rows := runDemoSummary(t, "-n", "300", "--database-url", testenv.PostgresURL(t), "--schema", schema)
	checkDemo(t, out, rows, map[string]demoRow{
		"signups":  {"300", "300", "0", "0", "0"},
		"orders":   {"1", "1", "0", "0", "0"},
		"emails":   {"2", "2", "0", "0", "0"},
		"audit":    {"2", "2", "0", "0", "0"},
		"invoices": {"1", "1", "3", "1", "1"},
		"reports":  {"6", "6", "0", "0", "0"},
	},
		"one that rolls back: nothing published. Delivered: orders 1, emails 1, audit 1",
		"max in flight observed 1",
		"the demo's tables stay in schema "+schema+" (see them with: txmq dlq ls --schema "+schema+"); remove them with: DROP SCHEMA \""+schema+"\" CASCADE",
	)
	_, routing, _ := strings.Cut(out, "\n2. routing")
	routing, _, _ = strings.Cut("2. routing"+routing, "\n3. retries")
	name, doc := testenv.DocWith(t, "../..", "<!-- demo routing output: checked by TestDemoSummaryWithDatabase (cmd/txmq) -->\n")
	if !strings.Contains(doc, "```text\n"+routing+"\n```") {
		t.Errorf("%s does not show the routing step as the demo prints it with a database:\n%s", name, routing)
	}
	var replayed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+schema+`".txmq_dead_letters WHERE queue = 'invoices' AND replayed_at IS NOT NULL`).Scan(&replayed); err != nil {
		t.Fatal(err)
	}
	if replayed != 1 {
		t.Errorf("%d replayed dead letter(s) of invoices in %s.txmq_dead_letters, want 1", replayed, schema)
	}
}

// TestDemoOnSQLite: with --backend sqlite://FILE and no app database set, the demo needs no
// server at all and still runs every step: the outbox and dead letters go into the same file,
// so routing runs in real transactions (one committed, one rolled back) and the dead letter is
// replayed from the file's table.
func TestDemoOnSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "demo.db")
	out, rows := runDemoSummary(t, "-n", "300", "--backend", "sqlite://"+path, "--database-url", "")
	checkDemo(t, out, rows, map[string]demoRow{
		"signups":  {"300", "300", "0", "0", "0"},
		"orders":   {"1", "1", "0", "0", "0"},
		"emails":   {"2", "2", "0", "0", "0"},
		"audit":    {"2", "2", "0", "0", "0"},
		"invoices": {"1", "1", "3", "1", "1"},
		"reports":  {"6", "6", "0", "0", "0"},
	},
		"txmq demo: sqlite backend, app database sqlite://"+path+" (the outbox and dead letters in the file)",
		"one that rolls back: nothing published. Delivered: orders 1, emails 1, audit 1",
		"max in flight observed 1",
		"the demo's tables stay in file "+path+" (see them with: txmq dlq ls --database-url sqlite://"+path+")",
	)
	if out := cliText(t, exitOK, "dlq", "ls", "--database-url", "sqlite://"+path); !strings.Contains(out, "invoices") {
		t.Errorf("txmq dlq ls on the demo's file lacks the replayed invoice:\n%s", out)
	}
}

// demoVolatile matches what changes from run to run: durations and the burst's batch count.
var demoVolatile = regexp.MustCompile(`\d+(\.\d+)?(ms|µs|s)\b|in \d+ batches`)

// TestReadmeDemoOutput checks that the README shows what the demo prints today, line by line,
// up to durations and the batch count.
func TestReadmeDemoOutput(t *testing.T) {
	t.Parallel()
	const marker = "<!-- demo output: checked by TestReadmeDemoOutput (cmd/txmq) -->\n```text\n"
	name, doc := testenv.DocWith(t, "../..", marker)
	_, block, _ := strings.Cut(doc, marker)
	block, _, _ = strings.Cut(block, "```")
	out, _ := runDemoSummary(t, "--database-url", "")
	norm := func(s string) []string {
		return strings.Split(strings.TrimRight(demoVolatile.ReplaceAllString(s, "_"), "\n"), "\n")
	}
	got, want := norm(out), norm(block)
	if len(got) != len(want) {
		t.Fatalf("the demo prints %d lines, %s shows %d: paste a new run into it\n%s", len(got), name, len(want), out)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("line %d: the demo prints\n%q\n%s shows\n%q", i+1, got[i], name, want[i])
		}
	}
}
