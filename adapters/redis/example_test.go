package redis_test

import (
	"context"
	"log"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/redis"
)

// New connects to a Redis server (or, with Options.Client, uses the app's go-redis client);
// nodes that share work use the same server and Prefix. It needs a server, so this example
// has no output line: go test compiles it but does not run it. (By setting instead:
// TXMQ_BACKEND=redis://127.0.0.1:6379/0?txmq_prefix=myapp, with the package imported.)
func ExampleNew() {
	ctx := context.Background()
	be, err := redis.New(&redis.Options{Addr: "127.0.0.1:6379", Prefix: "myapp"})
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
