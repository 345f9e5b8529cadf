package nats

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// DedupIDs implements core.IDDeduper with JetStream's message deduplication: each message with
// a caller id is a batch of its own, stored with Nats-Msg-Id = the id, and the queue's stream
// keeps ids for its duplicate window, which the Backend sets to the queue's IDDedupWindow.
func (be *Backend) DedupIDs() (core.DedupSupport, error) {
	return core.DedupSupport{OnePerBatch: true}, nil
}

// publishDedup stores a one-message batch under its caller id, after setting the stream's
// duplicate window to the batch's (see dupWindow).
func (be *Backend) publishDedup(ctx context.Context, q *queueState, b core.OutgoingBatch) error {
	if len(b.DedupIDs) != 1 {
		return fmt.Errorf("%w: nats: publish batch %s to queue %q: %d message ids to deduplicate in one batch; JetStream deduplicates whole messages, so core sends one message per batch (core.DedupSupport.OnePerBatch)", core.ErrInvalidConfig, b.ID, b.Queue, len(b.DedupIDs))
	}
	if err := be.dupWindow(ctx, q, b.DedupWindow); err != nil {
		return err
	}
	return be.storeDedup(ctx, q, b.ID, b.Body, b.DelayFrom(time.Now()), b.Key, b.Exclusive, b.DedupIDs[0])
}

// dupWindow makes the queue's stream keep message ids for window (its Duplicates setting),
// updating the stream when it says otherwise. The window is the stream's, so the queue's
// nodes must agree on it (they do: it is the queue's declaration).
func (be *Backend) dupWindow(ctx context.Context, q *queueState, window time.Duration) error {
	q.setup.Lock()
	defer q.setup.Unlock()
	if q.dupWindow == window {
		return nil
	}
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	info, err := q.stream.Info(cctx)
	if err != nil {
		return wrap("publish: reading stream "+q.streamName, q.name, err)
	}
	if info.Config.Duplicates != window {
		cfg := info.Config
		cfg.Duplicates = window
		// q.stream keeps the handle it had (readers take it without a lock once set up): a
		// stream handle is its name, and nothing reads its cached duplicate window.
		if _, err := be.js.UpdateStream(cctx, cfg); err != nil {
			return wrap(fmt.Sprintf("publish: setting the duplicate window of stream %s to %v (the queue's IDDedupWindow)", q.streamName, window), q.name, err)
		}
	}
	q.dupWindow = window
	return nil
}
