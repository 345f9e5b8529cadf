package inspect

import (
	"context"
	"fmt"
	"slices"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// Payload returns the payload of the message with id in queue ("" for any queue), one JSON
// value as published. Payloads come from the backend's native lookup (core.BatchInspector:
// memory, SQL jobs, Redis) whether or not a ledger is configured, since the ledger keeps
// states, not payloads: a message the backend no longer holds (completed, dead-lettered) has
// none here (a dead letter's payload is in its dead-letter row). The error wraps
// ErrLookupUnsupported when the backend cannot look up, ErrMessageNotFound when it does not
// hold the message.
func (i *Inspector) Payload(ctx context.Context, queue, id string) ([]byte, error) {
	got, err := i.Payloads(ctx, queue, []string{id})
	if err != nil {
		return nil, err
	}
	p, ok := got[id]
	if !ok {
		return nil, fmt.Errorf("%w: message %q: backend %s holds no batch with it, so no payload (completed and dead-lettered messages have none here)", core.ErrMessageNotFound, id, i.name)
	}
	return p, nil
}

// Payloads returns the payloads of the messages of ids that the backend still holds, by id,
// in one pass over queue's batches ("" for every queue), as Payload does for one. An id the
// backend does not hold is absent from the map.
func (i *Inspector) Payloads(ctx context.Context, queue string, ids []string) (map[string][]byte, error) {
	bi, ok := i.backend.(core.BatchInspector)
	if !ok {
		return nil, fmt.Errorf("%w: backend %s (payloads): it implements no core.BatchInspector, and the ledger keeps no payloads", core.ErrLookupUnsupported, i.name)
	}
	var queues []string
	if queue != "" {
		queues = []string{queue}
	} else if i.queues != nil {
		queues = i.queues()
	}
	out := make(map[string][]byte, len(ids))
	err := bi.InspectBatches(ctx, queues, func(b core.StoredBatch) bool {
		env, err := envelope.Decode(b.Body)
		if err != nil {
			return true // an undecodable batch holds no readable payloads
		}
		for k, id := range env.MessageIDs {
			if k < len(env.Messages) && slices.Contains(ids, id) {
				out[id] = slices.Clone(env.Messages[k])
			}
		}
		return len(out) < len(ids)
	})
	if err != nil {
		return nil, fmt.Errorf("txmq: looking payloads up in backend %s: %w", i.name, err)
	}
	return out, nil
}
