// Command quickstart is the README's Quick start: a queue, a listener and two publishes on
// the embedded memory backend, no server needed. Run it with `go run ./examples/quickstart`.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/txmq/txmq"
)

// Signup is the message: any value that survives a JSON round trip.
type Signup struct {
	Email string `json:"email"`
}

// Signups is declared once, usually in a package-level var; its message type comes from the
// config. The config is closed and validated here.
var Signups = txmq.MustDeclare("signups", txmq.QueueConfig[Signup]{
	Transactional:        txmq.Try, // Require, Try or Never: see Routing below
	MaxConcurrentBatches: txmq.Cap(8),
	OnError: func(msgs []Signup, err error, attempts int) error {
		log.Printf("gave up on %d signups after %d runs: %v", len(msgs), attempts, err)
		return nil
	},
})

func main() {
	ctx := context.Background()
	// The backend is a setting: TXMQ_BACKEND, default memory:// (embedded, no server). Open
	// also reads TXMQ_DATABASE_URL for the transactional outbox; see "The backend is a setting".
	app, err := txmq.Open(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(ctx) // flushes what is buffered, waits for running listeners
	node := app.Node

	// One listener per queue per node. It gets a slice of messages and must be idempotent.
	handled := make(chan string, 16)
	err = Signups.Listen(node, func(ctx context.Context, msgs []Signup) error {
		for _, m := range msgs {
			fmt.Println("welcome", m.Email)
			handled <- m.Email
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}

	if err := Signups.Publish(ctx, node, Signup{Email: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := Signups.Publish(ctx, node, Signup{Email: "later@example.com"}, txmq.After(2*time.Second)); err != nil {
		log.Fatal(err)
	}

	// A real program runs until it is told to stop (a signal); this one until both signups
	// were handled.
	for range 2 {
		<-handled
	}
}
