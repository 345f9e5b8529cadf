package txmqtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

type Email struct {
	To string `json:"to"`
}

// ExampleNew shows the kit in a test: an isolated registry and memory backend, a started node,
// a recording listener, and waiting for delivery.
func ExampleNew() {
	t := &testing.T{} // in a real test, the *testing.T of the test function
	k := txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: true})
	emails := txmqtest.Declare(k, "emails", core.QueueConfig[Email]{Transactional: core.Try})
	rec := txmqtest.NewRecorder(func(e Email) string { return e.To })
	node := k.Node(nil)
	if err := rec.Listen(emails, node, func(ctx context.Context, msgs []Email) error {
		return nil // send the emails; must be idempotent
	}); err != nil {
		fmt.Println(err)
		return
	}
	for _, to := range []string{"a@example.com", "b@example.com"} {
		_ = emails.Publish(context.Background(), node, Email{To: to})
	}
	k.Eventually(5*time.Second, func() bool { return rec.Distinct() == 2 }, "both emails sent")
	k.WaitIdle(node)
	fmt.Println(rec.Keys(), "each at least twice:", rec.MinCount(rec.Keys()) >= 2)
	// Output: [a@example.com b@example.com] each at least twice: true
}
