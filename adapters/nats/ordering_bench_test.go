package nats

import (
	"testing"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// BenchmarkOrdering: 1,000 keys x 100 messages, unordered then Ordered, in one run
// (go test -run X -bench Ordering -benchtime 1x ./adapters/nats); see txmqtest.BenchOrdering.
func BenchmarkOrdering(b *testing.B) {
	url := natstest.NATSURL(b)
	txmqtest.BenchOrdering(b, func(b *testing.B) core.Backend { return openBackend(b, url, nil) })
}
