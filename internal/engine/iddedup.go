package engine

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/iddedup"
)

// checkDedup refuses a queue with an IDDedupWindow when the node's backend cannot deduplicate
// caller ids, or not for that long.
func (n *Engine) checkDedup(spec *Spec) error {
	if spec == nil || spec.IDWindow <= 0 {
		return nil
	}
	if n.dedupErr != nil {
		return fmt.Errorf("txmq: queue %q has an IDDedupWindow but this node's backend cannot deduplicate message ids; use an adapter that can (see each adapter's \"Delivery semantics\") or declare the queue without IDDedupWindow: %w", spec.Name, n.dedupErr)
	}
	if w := n.dedup.MaxWindow; w > 0 && spec.IDWindow > w {
		return fmt.Errorf("%w: queue %q: IDDedupWindow %v is longer than this backend keeps ids (%v); declare a window of at most %v", core.ErrInvalidConfig, spec.Name, spec.IDWindow, w, w)
	}
	return nil
}

// publishBatch stores b in the backend; a batch whose caller ids deduplicate leaves out the
// messages the backend already holds (counted in Stats.Deduplicated) and stores the rest. It
// returns the batch as stored: Messages 0 when every message was a duplicate.
func (n *Engine) publishBatch(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error) {
	if b.DedupWindow <= 0 {
		return b, n.backend.Publish(ctx, b)
	}
	stored, dropped, err := iddedup.Publish(ctx, n.backend.Publish, b)
	if len(dropped) > 0 {
		n.stats.deduplicated.Add(int64(len(dropped)))
		n.log.Debug("txmq: message ids already published within the queue's IDDedupWindow; left out", "queue", b.Queue, "batch", b.ID, "ids", len(dropped))
	}
	return stored, err
}

// repeatedIDs counts the caller-id messages of ps whose id an earlier one of ps already has:
// batches leaves them out before the backend is asked (firstOfEachID).
func repeatedIDs(ps []*core.Pending) int {
	var seen map[string]struct{}
	n := 0
	for _, p := range ps {
		if m := meta(p); m == nil || !m.callerIDs {
			continue
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		for _, msg := range p.Messages {
			if _, dup := seen[msg.ID]; dup {
				n++
				continue
			}
			seen[msg.ID] = struct{}{}
		}
	}
	return n
}
