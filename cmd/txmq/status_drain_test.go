package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestStatusDrain: during a swap, --drain adds each old backend's depths per queue (JSON) and
// a summary saying whether it is empty (table).
func TestStatusDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newURL, oldURL := "memory://"+testenv.UniqueName("statusnew"), "memory://"+testenv.UniqueName("statusold")
	// A named memory backend lives until a handle is closed, and the command closes its own:
	// each run below sees a fresh old backend, seeded with one ready batch when asked.
	seed := func() {
		t.Helper()
		old, err := core.OpenBackend(ctx, oldURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = old.Close() })
		if err := old.Publish(ctx, testBatch("emails", "a")); err != nil {
			t.Fatal(err)
		}
	}
	seed()
	out, _ := cli(t, exitOK, "status", "--backend", newURL, "--drain", oldURL, "--queue", "emails,reports", "--json")
	var rows []queueStatus
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if r := rows[0]; r.Queue != "emails" || *r.Ready != 0 || len(r.Old) != 1 || r.Old[0] != (oldDepth{Backend: oldURL, Ready: 1}) {
		t.Fatalf("emails row: want the new backend empty and the old one holding 1 ready batch:\n%s", out)
	}
	seed()
	out, _ = cli(t, exitOK, "status", "--backend", newURL, "--drain", oldURL, "--queue", "emails")
	if !strings.Contains(out, "OLD BACKEND") || !strings.Contains(out, oldURL) || !strings.Contains(out, "holds batches") {
		t.Fatalf("status table during the drain:\n%s", out)
	}
	out, _ = cli(t, exitOK, "status", "--drain", oldURL, "--queue", "emails")
	if !strings.Contains(out, "empty") || !strings.Contains(out, "TXMQ_DRAIN_BACKENDS") {
		t.Fatalf("status table after the drain:\n%s", out)
	}
}
