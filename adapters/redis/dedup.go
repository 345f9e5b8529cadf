package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// DedupIDs implements core.IDDeduper: exact, any window, per message id, in the publish
// script (see publishDedupScript).
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, nil }

// publishDedup runs publishDedupScript: the batch is stored with its ids recorded, or nothing
// is stored and the ids already held come back as a *core.DuplicateError.
func (be *Backend) publishDedup(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	windowMs := max(int64((b.DedupWindow+time.Millisecond-1)/time.Millisecond), 1)
	args := make([]any, 0, 8+len(b.DedupIDs))
	args = append(args, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b), windowMs)
	for _, id := range b.DedupIDs {
		args = append(args, id)
	}
	res, err := publishDedupScript.Run(ctx, be.rdb, k.dedup, args...).Result()
	if err != nil {
		return err
	}
	taken, ok := res.([]any)
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(taken))
	for _, v := range taken {
		ids = append(ids, fmt.Sprint(v))
	}
	return &core.DuplicateError{Queue: b.Queue, IDs: ids}
}
