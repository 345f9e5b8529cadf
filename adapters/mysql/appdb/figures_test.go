package appdb_test

import (
	"testing"

	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestFigures prints the cost of RunInSQLTx and the pickup on MariaDB (outboxtest.Figures).
// Run with TXMQ_APPDB_FIGURES=1.
func TestFigures(t *testing.T) { outboxtest.Figures(t, target) }

// TestControlFigures prints the control tables' costs on MariaDB (outboxtest.ControlFigures).
// Run with TXMQ_APPDB_FIGURES=1.
func TestControlFigures(t *testing.T) { outboxtest.ControlFigures(t, target) }
