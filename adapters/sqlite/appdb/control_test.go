package appdb_test

import (
	"testing"

	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestControl runs the control tables' suite (outboxtest.RunControl) on SQLite, several
// processes being several *sql.DB handles on one file.
func TestControl(t *testing.T) {
	t.Parallel()
	outboxtest.RunControl(t, target)
}
