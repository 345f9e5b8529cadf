package memory_test

import (
	"testing"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// BenchmarkOrdering: 1,000 keys x 100 messages, unordered then Ordered, in one run
// (go test -run X -bench Ordering -benchtime 1x ./adapters/memory); see txmqtest.BenchOrdering.
func BenchmarkOrdering(b *testing.B) {
	txmqtest.BenchOrdering(b, func(b *testing.B) core.Backend {
		be := memory.New(nil)
		b.Cleanup(func() { _ = be.Close() })
		return be
	})
}
