package engine

import "fmt"

// checkFair refuses a fair queue when the node's backend does not share claims fairly by
// key (core.FairSharer), as checkPrioritized refuses a prioritized one.
func (n *Engine) checkFair(spec *Spec) error {
	switch {
	case spec == nil || !spec.Fair:
		return nil
	case n.fairErr == nil && spec.Prioritized && n.fairPrioErr != nil:
		return fmt.Errorf("txmq: queue %q is Fair and Prioritized but this node's backend cannot rank a fair queue's batches by priority within a key; use an adapter that can (memory, redis: see \"Fair share by key\" in docs/guide.md) or drop one of the two: %w", spec.Name, n.fairPrioErr)
	case n.fairErr == nil:
		return nil
	}
	return fmt.Errorf("txmq: queue %q is Fair but this node's backend cannot share claims round-robin by fairness key; use an adapter that can (memory, sqljobs, mysql, redis: see \"Fair share by key\" in docs/guide.md) or declare the queue without Fair: %w", spec.Name, n.fairErr)
}
