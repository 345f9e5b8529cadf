package nats_test

import (
	"context"
	"log"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/nats"
)

// New dials a NATS server with JetStream (nats-server 2.12 or later); nodes that share work
// use the same Prefix. It needs a server, so this example has no output line: go test
// compiles it but does not run it. (By setting instead:
// TXMQ_BACKEND=nats://127.0.0.1:4222?txmq_prefix=app, with the package imported.)
func ExampleNew() {
	ctx := context.Background()
	be, err := nats.New("nats://127.0.0.1:4222", &nats.Options{Prefix: "app"})
	if err != nil {
		log.Fatal(err)
	}
	defer be.Close()

	node, err := txmq.NewNode(be, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	// Listen, then node.Start(ctx), as on any backend.
}
