package drain

import (
	"fmt"

	"github.com/txmq/txmq/core"
)

var _ core.FairSharer = (*Backend)(nil)

// SharesFairlyByPriority implements core.FairPrioritizer as SharesFairly does: its primary's.
func (d *Backend) SharesFairlyByPriority() error {
	if err := core.SharesFairlyByPriority(d.primary); err != nil {
		return fmt.Errorf("drain: the primary backend: %w", err)
	}
	return nil
}

// SharesFairly implements core.FairSharer: nil when the primary shares claims fairly by key,
// where every new batch goes with its fairness key. As with priorities, the old backends'
// batches are fetched beside the primary's: while a drain runs, each backend hands out its
// own batches round-robin by key, and the two turns are not merged into one. An error names
// the primary otherwise, and a node over the wrapper refuses fair queues with it.
func (d *Backend) SharesFairly() error {
	if err := core.SharesFairly(d.primary); err != nil {
		return fmt.Errorf("drain: the primary backend: %w", err)
	}
	return nil
}
