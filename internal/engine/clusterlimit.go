package engine

import "fmt"

// checkLimits refuses a queue with a cluster-wide concurrency limit (Spec.ClusterLimit or
// Spec.KeyLimit) when the node's backend does not enforce such limits (core.ClusterLimiter),
// naming the queue and the setting, as checkFair refuses a fair queue.
func (n *Engine) checkLimits(spec *Spec) error {
	if spec == nil || n.limitErr == nil || (spec.ClusterLimit <= 0 && spec.KeyLimit <= 0) {
		return nil
	}
	setting := fmt.Sprintf("ClusterLimit %d", spec.ClusterLimit)
	if spec.ClusterLimit <= 0 {
		setting = fmt.Sprintf("KeyLimit %d", spec.KeyLimit)
	}
	return fmt.Errorf("txmq: queue %q sets %s but this node's backend cannot limit a queue's batches in flight cluster-wide; use an adapter that can (memory, sqljobs, mysql, redis, sqlite for ClusterLimit; all but sqlite for KeyLimit: see \"Cluster-wide limits\" in docs/guide.md), or drop the setting (MaxConcurrentBatches caps each node instead): %w", spec.Name, setting, n.limitErr)
}
