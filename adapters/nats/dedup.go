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
	// The config comes from the stream's create (or lookup) answer, not from a stream info
	// request: a busy cluster serves info requests last, and one that outlasted the call
	// timeout failed the publish (parity identity/ids_dedup_within_window on the NATS cluster).
	// Every node of a queue asks for the same window (it is the queue's declaration), so an
	// answer older than another node's update at most repeats that update.
	info := q.stream.CachedInfo()
	if info == nil || info.Config.Duplicates != window {
		cfg := be.streamConfig(q)
		if info != nil {
			cfg = info.Config
		}
		cfg.Duplicates = window
		// q.stream keeps the handle it had (readers take it without a lock once set up): a
		// stream handle is its name, and nothing else reads its cached duplicate window.
		// The update sets a value, so it is sent again on an outage within the caller's
		// deadline, or two call timeouts, as the stream's creation is (see busy.go): a busy
		// cluster's meta leader answered after one (identity/ids_dedup_within_window under
		// stress-ng).
		err := be.retryBusy(ctx, busyDeadline(ctx, 2*be.opts.Timeout), isUnavailable, func() error {
			cctx, cancel := be.callCtx(ctx)
			defer cancel()
			_, err := be.js.UpdateStream(cctx, cfg)
			return err
		})
		if err != nil {
			return wrap(fmt.Sprintf("publish: setting the duplicate window of stream %s to %v (the queue's IDDedupWindow)", q.streamName, window), q.name, err)
		}
	}
	q.dupWindow = window
	return nil
}
