package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// Welcome is the message of the examples below.
type Welcome struct {
	Email string `json:"email"`
}

// Welcomes is declared once, in a package-level var: MustDeclare puts it in
// txmq.DefaultRegistry, which every node uses unless NodeOptions.Registry says otherwise.
var Welcomes = txmq.MustDeclare("example-welcomes", txmq.QueueConfig[Welcome]{Transactional: txmq.Try})

// Declare a queue at package level, listen on a node, publish: the listener gets the message.
func ExampleMustDeclare() {
	ctx := context.Background()
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, nil) // nil options: the default registry, with Welcomes
	if err != nil {
		log.Fatal(err)
	}

	got := make(chan Welcome, 10)
	err = Welcomes.Listen(node, func(ctx context.Context, msgs []Welcome) error {
		for _, m := range msgs {
			got <- m // a real listener sends the email, idempotently
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := Welcomes.Publish(ctx, node, Welcome{Email: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("welcome", (<-got).Email)
	_ = node.Close(ctx)
	// Output: welcome ada@example.com
}

// Publish outside a transaction goes through the node's publish buffer, which Close flushes;
// publishing after Close is refused.
func ExampleQueue_Publish() {
	ctx := context.Background()
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, email := range []string{"ada@example.com", "grace@example.com"} {
		if err := Welcomes.Publish(ctx, node, Welcome{Email: email}); err != nil {
			log.Fatal(err)
		}
	}
	_ = node.Close(ctx) // flushes the buffer: both messages are now in the backend

	depths, err := backend.Depths(ctx, []string{Welcomes.Name()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready batches:", depths[Welcomes.Name()].Ready > 0)

	err = Welcomes.Publish(ctx, node, Welcome{Email: "late@example.com"})
	fmt.Println("after Close:", errors.Is(err, txmq.ErrClosed))
	// Output:
	// ready batches: true
	// after Close: true
}

// Open builds what an app needs from its settings: a node on the backend Config.Backend names
// (with a nil Config, from TXMQ_BACKEND and the other TXMQ_ variables) and, when DatabaseURL is
// set, the outbox Store.
func ExampleOpen() {
	ctx := context.Background()
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://"})
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(context.Background())

	got := make(chan Welcome, 10)
	if err := Welcomes.Listen(app.Node, func(ctx context.Context, msgs []Welcome) error {
		for _, m := range msgs {
			got <- m
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := Welcomes.Publish(ctx, app.Node, Welcome{Email: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("welcome", (<-got).Email)
	fmt.Println("outbox store:", app.Store != nil) // no DatabaseURL, no outbox
	// Output:
	// welcome ada@example.com
	// outbox store: false
}

// OpenBackend opens a backend by URL. memory://NAME is one backend per name in the process;
// txmq_ query parameters set the adapter's options, and an unknown one is refused.
func ExampleOpenBackend() {
	ctx := context.Background()
	a, err := txmq.OpenBackend(ctx, "memory://example-shared?txmq_lease=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := txmq.OpenBackend(ctx, "memory://example-shared")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same backend:", a == b)

	_, err = txmq.OpenBackend(ctx, "memory://?txmq_bogus=1")
	fmt.Println("unknown parameter:", errors.Is(err, txmq.ErrInvalidConfig))
	// Output:
	// same backend: true
	// unknown parameter: true
}

// RunInTx publishes in the app's own transaction: the message is written to the outbox in
// tx, published right after the commit, and never published if the transaction rolls back.
// It needs PostgreSQL (TXMQ_DATABASE_URL), so this example has no output line: go test
// compiles it but does not run it.
func ExampleApp_RunInTx() {
	ctx := context.Background()
	app, err := txmq.Open(ctx, nil) // TXMQ_BACKEND, TXMQ_DATABASE_URL, ...
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(context.Background())

	err = app.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO accounts (email) VALUES ($1)`, "ada@example.com"); err != nil {
			return err
		}
		// The same ctx: the message joins the transaction.
		return Welcomes.Publish(ctx, app.Node, Welcome{Email: "ada@example.com"})
	})
	if err != nil {
		log.Fatal(err)
	}
}
