package redis

import (
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// BenchmarkOrdering: 1,000 keys x 100 messages, unordered then Ordered, in one run
// (go test -run X -bench Ordering -benchtime 1x ./adapters/redis); see txmqtest.BenchOrdering.
func BenchmarkOrdering(b *testing.B) {
	txmqtest.BenchOrdering(b, func(b *testing.B) core.Backend { return newTestBackend(b, "", nil) })
}
