package mysql

import (
	"testing"

	"github.com/txmq/txmq/txmqtest/backendtest"
)

// A fair claim of several batches goes round the keys, one batch per key per round, and the
// next claim starts after the last key served; a key at its KeyLimit is passed over.
func TestFairClaimRoundRobin(t *testing.T) {
	t.Parallel()
	backendtest.FairRoundRobin(t, newWorld(t).backend(nil), "rr")
}
