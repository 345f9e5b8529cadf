package appdb_test

import (
	"testing"

	_ "github.com/txmq/txmq/adapters/mysql" // the mysql:// jobs backend: durable across the killed processes
	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestCrashWindow runs outboxtest.CrashWindow on MySQL/MariaDB: publishers killed at random
// moments lose nothing and deliver nothing of a transaction that did not commit.
func TestCrashWindow(t *testing.T) { outboxtest.CrashWindow(t, target) }
