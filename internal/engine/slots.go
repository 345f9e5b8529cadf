package engine

import (
	"cmp"
	"slices"

	"github.com/txmq/txmq/core"
)

// Slots returns the queues the node listens to, sorted by name, each with the batches
// holding one of its slots and its cap (1 for an Exclusive queue, at most a ClusterLimit,
// core.Unlimited without a concurrency cap): what the heartbeat feature publishes.
func (n *Engine) Slots() []core.NodeQueue {
	dr := &n.drv
	dr.mu.Lock()
	out := make([]core.NodeQueue, 0, len(dr.listeners))
	specs := make([]*Spec, 0, len(dr.listeners))
	for _, l := range dr.listeners {
		specs = append(specs, l.Spec)
		out = append(out, core.NodeQueue{Queue: l.Spec.Name, InUse: dr.inflight[l.Spec.Name]})
	}
	dr.mu.Unlock()
	for i, s := range specs { // Cap may call back into the app: outside mu
		out[i].Cap = s.limit()
		if s.Exclusive {
			out[i].Cap, out[i].Limit = 1, 1
		}
		if s.ClusterLimit > 0 {
			out[i].Limit = s.ClusterLimit
		}
		out[i].KeyLimit = s.KeyLimit
		if n := s.ClusterLimit; n > 0 && (out[i].Cap == core.Unlimited || out[i].Cap > n) {
			out[i].Cap = n // the node cannot run more than the cluster may
		}
	}
	slices.SortFunc(out, func(a, b core.NodeQueue) int { return cmp.Compare(a.Queue, b.Queue) })
	return out
}
