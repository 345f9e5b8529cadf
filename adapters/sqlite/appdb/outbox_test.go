package appdb_test

import (
	"testing"

	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestOutbox runs the outbox's suite (outboxtest.RunOutbox) on SQLite.
func TestOutbox(t *testing.T) {
	t.Parallel()
	outboxtest.RunOutbox(t, target)
}
