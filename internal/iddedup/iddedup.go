// Package iddedup publishes a batch whose caller ids deduplicate (core.IDDeduper): when the
// backend refuses some ids as already published, their messages are taken out and the rest is
// published again. The engine's flush and the outbox's relay and sweep share it, so a retried
// flush of the same ids delivers each message once on every path.
package iddedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// Publish stores b with publish. For a batch with DedupWindow, a refusal naming duplicate ids
// (core.DuplicateError) takes their messages out and publishes the rest, until the backend
// stores it or nothing is left. It returns the batch as stored (Messages 0 when every message
// was a duplicate: nothing was stored, and that is a success) and the ids taken out.
func Publish(ctx context.Context, publish func(context.Context, core.OutgoingBatch) error, b core.OutgoingBatch) (core.OutgoingBatch, []string, error) {
	var dropped []string
	for {
		err := publish(ctx, b)
		var de *core.DuplicateError
		if err == nil || b.DedupWindow <= 0 || !errors.As(err, &de) {
			return b, dropped, err
		}
		rest, removed, ferr := Without(b, de.IDs)
		if ferr != nil {
			return b, dropped, fmt.Errorf("%w (and taking the duplicates out failed: %v)", err, ferr)
		}
		if len(removed) == 0 {
			// The adapter named no id of the batch: retrying would loop.
			return b, dropped, fmt.Errorf("queue %q, batch %s: the backend refused ids %q that are not in the batch (an adapter bug): %w", b.Queue, b.ID, de.IDs, err)
		}
		dropped = append(dropped, removed...)
		if rest.Messages == 0 {
			return rest, dropped, nil
		}
		b = rest
	}
}

// Without returns b without the messages whose ids are in ids, re-encoded under the same
// batch id, and the ids it took out. A batch left empty has Messages 0 and no Body.
func Without(b core.OutgoingBatch, ids []string) (core.OutgoingBatch, []string, error) {
	drop := make(map[string]bool, len(ids))
	for _, id := range ids {
		drop[id] = true
	}
	env, err := envelope.Decode(b.Body)
	if err != nil {
		return b, nil, err
	}
	var removed []string
	env.KeepMessages(func(i int) bool { // ids, bodies and each message's trace context
		if i < len(env.MessageIDs) && drop[env.MessageIDs[i]] {
			removed = append(removed, env.MessageIDs[i])
			return false
		}
		return true
	})
	keptIDs := env.MessageIDs
	out := b
	out.Messages = len(env.Messages)
	out.DedupIDs = keptIDs
	if b.MessageIDs != nil {
		out.MessageIDs = keptIDs
	}
	if len(env.Messages) == 0 {
		out.Body = nil
		return out, removed, nil
	}
	out.Body = envelope.Encode(env)
	return out, removed, nil
}
