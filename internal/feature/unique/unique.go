// Package unique is unique jobs (QueueConfig.Unique): each message with a unique key is
// stored alone in its batch, and the backend (core.UniqueKeeper) stores it only when no
// earlier batch holds the key in the queue's mode. It is an engine.SpecChecker, which refuses
// a mode the node's backend does not keep, and an engine.PublishWrapper, which turns the
// backend's refusal (core.UniqueError) into a batch left out: counted in
// Stats.Deduplicated, logged, and a success for the publisher.
package unique

import (
	"context"
	"errors"
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Keys is the unique jobs feature: an engine.Attacher, engine.SpecChecker and
// engine.PublishWrapper.
type Keys struct {
	backend core.Backend
	e       *engine.Engine
}

// New returns unique jobs on backend.
func New(backend core.Backend) *Keys { return &Keys{backend: backend} }

// Attach implements engine.Attacher.
func (k *Keys) Attach(e *engine.Engine) { k.e = e }

// CheckSpec implements engine.SpecChecker: a unique queue needs a backend that keeps its mode.
func (k *Keys) CheckSpec(spec *engine.Spec) error {
	if spec == nil || spec.Unique.Mode == 0 {
		return nil
	}
	if err := core.KeepsUnique(k.backend, spec.Unique.Mode); err != nil {
		return fmt.Errorf("txmq: queue %q sets Unique mode %v but this node's backend cannot hold unique keys that way; use an adapter that can (see \"Unique jobs\" in docs/guide.md and the README's backend table) or declare the queue without Unique: %w", spec.Name, spec.Unique.Mode, err)
	}
	return nil
}

// WrapPublish implements engine.PublishWrapper: a unique batch whose key another batch holds
// is left out (counted, logged at info with the batch kept) and reported stored with no
// message; every other batch goes to next as it is.
func (k *Keys) WrapPublish(next engine.PublishFunc) engine.PublishFunc {
	return func(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error) {
		sb, err := next(ctx, b)
		if err == nil || b.Unique.Mode == 0 {
			return sb, err
		}
		var ue *core.UniqueError
		if !errors.As(err, &ue) {
			return sb, err
		}
		k.e.CountDeduplicated(b.Messages)
		k.e.Logger().Info("txmq: unique key held by another batch; the publish was left out", "queue", b.Queue, "unique_key", ue.Key, "mode", ue.Mode.String(), "kept_batch", ue.Kept, "batch", b.ID)
		out := b
		out.Messages, out.Body = 0, nil
		return out, nil
	}
}
