package sqlite_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqlite"
	"github.com/txmq/txmq/core"
)

// An app keeps its jobs in a SQLite file: OpenDB opens it with WAL, a busy timeout and
// synchronous=FULL, Migrate creates the tables, New makes the backend a node runs on. Every
// process that opens the same file shares the batches.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "txmq-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := sqlite.OpenDB(filepath.Join(dir, "app.db"), nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db, nil); err != nil {
		panic(err)
	}
	be, err := sqlite.New(ctx, db, &sqlite.Options{ReapInterval: -1})
	if err != nil {
		panic(err)
	}
	defer be.Close()

	if err := be.Publish(ctx, core.OutgoingBatch{ID: "b1", Queue: "emails", Body: []byte("hello"), Messages: 1}); err != nil {
		panic(err)
	}
	d, _ := be.Depths(ctx, []string{"emails"})
	fmt.Println("ready:", d["emails"].Ready)

	node, err := txmq.NewNode(be, nil)
	if err != nil {
		panic(err)
	}
	_ = node.Close(ctx)
	// Output: ready: 1
}

// TXMQ_BACKEND=sqlite://... names the file: two slashes and a relative path, or three
// slashes and an absolute one.
func ExampleFilePath() {
	for _, raw := range []string{"sqlite://app.db", "sqlite://data/jobs.db", "sqlite:///var/lib/app/jobs.db", "sqlite://:memory:"} {
		u, _ := url.Parse(raw)
		path, err := sqlite.FilePath(u)
		fmt.Printf("%s -> %q %v\n", raw, path, err != nil)
	}
	// Output:
	// sqlite://app.db -> "app.db" false
	// sqlite://data/jobs.db -> "data/jobs.db" false
	// sqlite:///var/lib/app/jobs.db -> "/var/lib/app/jobs.db" false
	// sqlite://:memory: -> "" true
}
