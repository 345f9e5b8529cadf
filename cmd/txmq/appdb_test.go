package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestDeadLetterCommands drives migrate, dlq and outbox against the real Postgres.
func TestDeadLetterCommands(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", url, "--schema", schema}
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != wantCode {
			t.Fatalf("txmq %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	// The first run says what it applied, per component, and leaves out the jobs tables of a
	// postgres:// backend when there is none; the second has nothing to apply.
	out := cli(exitOK, append([]string{"migrate", "--backend", ""}, db...)...)
	for _, want := range []string{"outbox: applied ", "0001_init.sql", "ledger: applied ", "sqljobs: skipped: no backend is set"} {
		if !strings.Contains(out, want) || strings.Contains(out, "up to date") {
			t.Fatalf("first migrate lacks %q (or says up to date):\n%s", want, out)
		}
	}
	out = cli(exitOK, append([]string{"migrate", "--backend", "redis://127.0.0.1:6379/0"}, db...)...)
	for _, want := range []string{"outbox: schema \"" + schema + "\" is up to date", "ledger: schema", "sqljobs: skipped: the backend redis://127.0.0.1:6379/0 keeps its own jobs"} {
		if !strings.Contains(out, want) || strings.Contains(out, "applied") {
			t.Fatalf("second migrate lacks %q (or applied something):\n%s", want, out)
		}
	}
	if out := cli(exitOK, append([]string{"dlq", "ls"}, db...)...); !strings.Contains(out, "no dead letters") {
		t.Fatalf("empty dlq ls: %s", out)
	}

	// Store one dead letter through the API the engine uses.
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	b := parity.EncodeBatch("emails", []string{"m1"}, json.RawMessage(`{"to":"ada@example.com"}`))
	id, body := b.ID, b.Body
	if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: "emails", BatchID: id, Body: body,
		Reason: core.ReasonDeliveryExhausted, Error: "smtp: 550", Attempts: 5, Messages: 1}); err != nil {
		t.Fatal(err)
	}

	out = cli(exitOK, append([]string{"dlq", "ls"}, db...)...)
	if !strings.Contains(out, "emails") || !strings.Contains(out, "delivery_exhausted") || !strings.Contains(out, "smtp: 550") {
		t.Fatalf("dlq ls: %s", out)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(cli(exitOK, append([]string{"dlq", "ls", "--json", "--queue", "emails"}, db...)...)), &listed); err != nil || len(listed) != 1 {
		t.Fatalf("dlq ls --json: %v %v", listed, err)
	}
	dlID := strings.TrimSuffix(strings.TrimSuffix(jsonNumber(listed[0]["id"]), ".0"), "\n")
	if out := cli(exitOK, append([]string{"dlq", "show", dlID}, db...)...); !strings.Contains(out, "ada@example.com") {
		t.Fatalf("dlq show: %s", out)
	}
	cli(exitError, append([]string{"dlq", "show", "999999"}, db...)...)
	cli(exitUsage, append([]string{"dlq", "show", "x"}, db...)...)
	cli(exitUsage, append([]string{"dlq", "replay", dlID}, db...)...) // no backend
	if out := cli(exitOK, append([]string{"dlq", "replay", dlID, "--backend", "memory://"}, db...)...); !strings.Contains(out, "replayed dead letter") {
		t.Fatalf("dlq replay: %s", out)
	}
	cli(exitError, append([]string{"dlq", "replay", dlID, "--backend", "memory://"}, db...)...) // already replayed
	if out := cli(exitOK, append([]string{"outbox", "ls"}, db...)...); !strings.Contains(out, "outbox is empty") {
		t.Fatalf("outbox ls: %s", out)
	}
	cli(exitUsage, append([]string{"dlq", "purge"}, db...)...)
	if out := cli(exitUsage, append([]string{"dlq", "purge", "--all"}, db...)...); !strings.Contains(out, "--yes") {
		t.Fatalf("dlq purge without --yes and without a terminal: %s", out)
	}
	if out := cli(exitOK, append([]string{"dlq", "purge", "--all", "--yes"}, db...)...); !strings.Contains(out, "purged 1") {
		t.Fatalf("dlq purge: %s", out)
	}
	if out := cli(exitError, "dlq", "ls", "--database-url", url, "--schema", "txmq_missing_schema"); !strings.Contains(out, "run txmq migrate") {
		t.Fatalf("missing tables: %s", out)
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
