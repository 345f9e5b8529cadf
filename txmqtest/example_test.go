package txmqtest_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/txmqtest"
)

type Email struct {
	To string `json:"to"`
}

// TestKit is the kit in a test, as the package doc shows it: an isolated registry and memory
// backend, a started node, a recording listener, and waiting for delivery, with the test's own
// *testing.T.
func TestKit(t *testing.T) {
	t.Parallel()
	k := txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: true})
	emails := txmqtest.DeclareIn(k, "emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
	rec := txmqtest.NewRecorder(func(e Email) string { return e.To })
	node := k.Node(nil)
	if err := rec.Listen(emails, node, func(ctx context.Context, msgs []Email) error {
		return nil // send the emails; must be idempotent
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@example.com", "b@example.com"}
	for _, to := range want {
		if err := emails.Publish(context.Background(), node, Email{To: to}); err != nil {
			t.Fatal(err)
		}
	}
	k.Eventually(5*time.Second, func() bool { return rec.Distinct() == 2 }, "both emails sent")
	k.WaitIdle(node)
	if got := rec.Keys(); !slices.Equal(got, want) || rec.MinCount(want) < 2 {
		t.Fatalf("delivered %s; want each of %v at least twice (DuplicateDelivery)", rec.Summary(), want)
	}
}

// A Recorder records what a listener receives, duplicates counted, and Duplicate stores every
// batch twice, so a listener that is not idempotent fails in tests rather than in production.
// Both work without a test; in a test, New builds them into a Kit with Eventually and WaitIdle
// (see the package doc).
func ExampleRecorder() {
	ctx := context.Background()
	be := memory.New(nil)
	defer be.Close()
	reg := txmq.NewRegistry()
	emails := txmq.MustDeclareIn(reg, "emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
	node, err := txmq.NewNode(txmqtest.Duplicate(be), &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	rec := txmqtest.NewRecorder(func(e Email) string { return e.To })
	if err := rec.Listen(emails, node, func(ctx context.Context, msgs []Email) error {
		return nil // send the emails; must be idempotent
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	want := []string{"a@example.com", "b@example.com"}
	for _, to := range want {
		if err := emails.Publish(ctx, node, Email{To: to}); err != nil {
			log.Fatal(err)
		}
	}
	timeout := time.After(5 * time.Second)
	for {
		changed := rec.Changed()
		if rec.MinCount(want) >= 2 {
			break
		}
		select {
		case <-changed:
		case <-timeout:
			log.Fatalf("timed out: %s", rec.Summary())
		}
	}
	_ = node.Close(ctx)
	fmt.Println(rec.Keys(), "each at least twice:", rec.MinCount(want) >= 2)
	// Output: [a@example.com b@example.com] each at least twice: true
}
