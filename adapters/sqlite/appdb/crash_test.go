package appdb_test

import (
	"testing"

	_ "github.com/txmq/txmq/adapters/sqlite" // the sqlite:// jobs backend, in the same file
	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestCrashWindow runs outboxtest.CrashWindow on SQLite: publishers killed at random moments
// lose nothing and deliver nothing of a transaction that did not commit.
func TestCrashWindow(t *testing.T) { outboxtest.CrashWindow(t, target) }
