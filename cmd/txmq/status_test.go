package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// cli runs the command in-process and checks its exit code.
func cli(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, &out, &errOut); code != wantCode {
		t.Fatalf("txmq %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// cliText is cli returning stdout and stderr together.
func cliText(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	out, errOut := cli(t, wantCode, args...)
	return out + errOut
}

func testBatch(queue string, msgs ...string) core.OutgoingBatch {
	raw := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		raw[i] = json.RawMessage(`"` + m + `"`)
	}
	return parity.EncodeBatch(queue, nil, raw...)
}

func TestStatusUsage(t *testing.T) {
	t.Parallel()
	_, errOut := cli(t, exitUsage, "status", "--backend", "", "--database-url", "")
	if !strings.Contains(errOut, "nothing to report on") {
		t.Fatalf("stderr: %s", errOut)
	}
	// A backend alone lists its busy queues (core.QueueLister); an empty one has none.
	if out, _ := cli(t, exitOK, "status", "--backend", "memory://", "--database-url", ""); !strings.Contains(out, "no queues: the backend holds no batches") {
		t.Fatalf("stdout: %s", out)
	}
	if _, errOut = cli(t, exitOK, "status", "--help"); !strings.Contains(errOut, "Usage: txmq status") {
		t.Fatalf("stderr: %s", errOut)
	}
	if _, errOut = cli(t, exitUsage, "status", "--backend", "kafka://h", "--queue", "a"); !strings.Contains(errOut, `unknown scheme "kafka"`) {
		t.Fatalf("stderr: %s", errOut)
	}
}

// TestStatusBackendOnly asks a named memory backend (shared within the process) for depths.
func TestStatusBackendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := "memory://" + testenv.UniqueName("status")
	be, err := core.OpenBackend(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Publish(ctx, testBatch("emails", "a")); err != nil {
		t.Fatal(err)
	}
	b := testBatch("emails", "b")
	b.NotBefore = time.Now().Add(time.Hour)
	if err := be.Publish(ctx, b); err != nil {
		t.Fatal(err)
	}
	// reports has nothing in the backend: unknown, with the known queues listed, exit 1.
	out, errOut := cli(t, exitError, "status", "--backend", url, "--queue", "emails,reports", "--json")
	if !strings.Contains(errOut, `unknown queue "reports"`) || !strings.Contains(errOut, "known queues: emails") {
		t.Fatalf("status of an unknown queue: %s", errOut)
	}
	var rows []queueStatus
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if r := rows[0]; r.Queue != "emails" || *r.Ready != 1 || *r.Delayed != 1 || *r.InFlight != 0 || r.DeadLetters != nil || r.OutboxRows != nil {
		t.Fatalf("emails row: %s", out)
	}
	// The command closed the named backend: the next open starts an empty one.
	be2, err := core.OpenBackend(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer be2.Close()
	if err := be2.Publish(ctx, testBatch("emails", "c")); err != nil {
		t.Fatal(err)
	}
	out, _ = cli(t, exitOK, "status", "--backend", url, "--queue", "emails")
	if !strings.Contains(out, "QUEUE") || !strings.Contains(out, "emails") || !strings.Contains(out, "-") {
		t.Fatalf("status table:\n%s", out)
	}
}

// TestStatusWithDatabase reads dead letters and the outbox backlog from the real Postgres and
// depths from a memory backend, in one table.
func TestStatusWithDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", dbURL, "--schema", schema}
	cli(t, exitOK, append([]string{"migrate"}, db...)...)
	if out, _ := cli(t, exitOK, append([]string{"status"}, db...)...); !strings.Contains(out, "no queues") {
		t.Fatalf("empty status: %s", out)
	}
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	dl := testBatch("emails", "x")
	if err := store.DeadLetter(ctx, &core.DeadLetter{Queue: "emails", BatchID: dl.ID, Body: dl.Body, Reason: core.ReasonDeliveryExhausted, Attempts: 5, Messages: 1}); err != nil {
		t.Fatal(err)
	}
	if err := store.Handoff(ctx, []core.OutgoingBatch{testBatch("reports", "r1"), testBatch("reports", "r2")}); err != nil {
		t.Fatal(err)
	}
	url := "memory://" + testenv.UniqueName("status")
	be, err := core.OpenBackend(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Publish(ctx, testBatch("extra", "e")); err != nil {
		t.Fatal(err)
	}
	out, _ := cli(t, exitOK, append([]string{"status", "--json", "--backend", url, "--queue", "extra"}, db...)...)
	var rows []queueStatus
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	got := map[string]queueStatus{}
	for _, r := range rows {
		got[r.Queue] = r
	}
	if r := got["emails"]; *r.DeadLetters != 1 || *r.OutboxRows != 0 || *r.Ready != 0 {
		t.Fatalf("emails: %s", out)
	}
	if r := got["reports"]; *r.OutboxRows != 2 || r.OldestAgeSec == nil || *r.DeadLetters != 0 {
		t.Fatalf("reports: %s", out)
	}
	if r := got["extra"]; *r.Ready != 1 || *r.DeadLetters != 0 || *r.OutboxRows != 0 {
		t.Fatalf("extra: %s", out)
	}
	out, _ = cli(t, exitOK, append([]string{"status"}, db...)...) // database only
	for _, want := range []string{"DEAD LETTERS", "emails", "reports"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status table lacks %q:\n%s", want, out)
		}
	}
}
