package engine

import "fmt"

// checkPrioritized refuses a prioritized queue when the node's backend does not honour
// priorities (core.Prioritizer), as checkOrdered refuses an ordered one.
func (n *Engine) checkPrioritized(spec *Spec) error {
	if spec == nil || !spec.Prioritized || n.prioErr == nil {
		return nil
	}
	return fmt.Errorf("txmq: queue %q is Prioritized but this node's backend cannot order batches by priority; use an adapter that can (memory, sqljobs, mysql, redis, sqlite: see \"Priorities\" in docs/guide.md) or declare the queue without Prioritized: %w", spec.Name, n.prioErr)
}
