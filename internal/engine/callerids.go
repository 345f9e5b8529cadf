package engine

import (
	"github.com/txmq/txmq/core"
)

// Caller ids (ID/IDs at publish) that deduplicate, on a queue with an IDDedupWindow: the
// engine leaves out the repeats that meet in one flush (batches' firstOfEachID, counted
// here); the id dedup feature (feature/dedup: a SpecChecker and a PublishWrapper) refuses a
// window the backend cannot honour and leaves out the ids the backend already holds.

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
