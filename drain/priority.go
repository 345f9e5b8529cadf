package drain

import (
	"fmt"

	"github.com/txmq/txmq/core"
)

var _ core.Prioritizer = (*Backend)(nil)

// Prioritizes implements core.Prioritizer: nil when the primary honours priorities, where
// every new batch goes with its lead. The old backends' batches are fetched beside the
// primary's as they are stored there: while a drain runs, each backend hands out its own
// batches by priority, and the two are not merged into one order (an old backend without
// priorities hands its batches out in its own order). An error names the primary otherwise,
// and a node over the wrapper refuses prioritized queues with it.
func (d *Backend) Prioritizes() error {
	if err := core.Prioritizes(d.primary); err != nil {
		return fmt.Errorf("drain: the primary backend: %w", err)
	}
	return nil
}
