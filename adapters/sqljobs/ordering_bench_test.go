package sqljobs

import (
	"context"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// BenchmarkOrdering: 1,000 keys x 100 messages, unordered then Ordered, in one run
// (go test -run X -bench Ordering -benchtime 1x ./adapters/sqljobs); see
// txmqtest.BenchOrdering. Each run gets a schema of its own.
func BenchmarkOrdering(b *testing.B) {
	admin := testenv.PostgresPool(b)
	txmqtest.BenchOrdering(b, func(b *testing.B) core.Backend {
		schema := testenv.PostgresSchema(b, admin)
		if err := Migrate(context.Background(), admin, &Options{Schema: schema}); err != nil {
			b.Fatal(err)
		}
		be, err := New(context.Background(), poolFor(b, testenv.PostgresURL(b), nil), &Options{Schema: schema, ReapInterval: -1, Logger: txmqtest.DiscardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.Close() })
		return be
	})
}
