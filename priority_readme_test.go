package txmq_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// TestReadmePriorities: the Priorities fragment of the docs (docs/guide.md) is the code in
// readme_snippets_test.go, and it works: a reset published after a backlog of lower priority
// runs first.
func TestReadmePriorities(t *testing.T) {
	t.Parallel()
	if got, want := readmeBlock(t, "## Priorities", "go"), fragment(t, "readme_snippets_test.go", "priorities", false); got != want {
		t.Fatalf("the docs' Priorities fragment differs from the priorities fragment of readme_snippets_test.go:\ndoc:\n%s\ncode:\n%s", got, want)
	}
	ctx := context.Background()
	be, err := core.OpenBackend(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	node, err := txmq.NewNode(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	letter := Email{To: "all@example.com", Subject: "newsletter"}
	if err := Emails.PublishMany(ctx, node, []Email{letter, letter, letter}); err != nil { // one batch
		t.Fatal(err)
	}
	if err := sendReset(ctx, node, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	for d, _ := node.Depths(ctx); d["emails"].Ready < 2; d, _ = node.Depths(ctx) {
		time.Sleep(time.Millisecond) // until the newsletter and the reset batches are stored
	}
	// The backend hands out the reset first (a listener's runs would race each other).
	claims, err := be.Fetch(ctx, core.FetchRequest{Node: "t", Queues: []core.QueueSlots{{Queue: "emails", Free: 1, Prioritized: true}}, Max: 1})
	if err != nil || len(claims) != 1 {
		t.Fatalf("Fetch: %d claims, %v", len(claims), err)
	}
	if !bytes.Contains(claims[0].Body, []byte("password reset")) {
		t.Fatalf("first claimed: %s; want the password reset (priority 9) before the newsletters", claims[0].Body)
	}
}
