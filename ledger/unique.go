package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/txmq/txmq/core"
)

// ForgetBatch deletes the kept copy of batch id of queue (ledger mode): the backend stored
// nothing for it, because its unique key was held by another batch (core.UniqueError) or every
// caller id of it was a duplicate, so there is nothing to settle and nothing to republish. A
// no-op when the mode is off or the batch is not kept, and when another transaction holds its
// row (a republish pass publishing it: the pass re-arms it, and the next one finds the key
// held again), so that a publish inside a pass never waits for the pass.
func (l *Ledger) ForgetBatch(ctx context.Context, queue, id string) error {
	if !l.opts.Mode {
		return nil
	}
	if _, err := l.pool.Exec(ctx, `DELETE FROM `+l.kept+` WHERE (queue, batch_id) IN (
	SELECT queue, batch_id FROM `+l.kept+` WHERE queue = $1 AND batch_id = $2 FOR UPDATE SKIP LOCKED)`, queue, id); err != nil {
		return fmt.Errorf("txmq ledger: forgetting kept batch %s of queue %q (its publish stored nothing) in %s: %w", id, queue, l.kept, err)
	}
	return nil
}

// forgetRefused forgets b's kept copy when err is the backend's refusal of a unique batch
// whose key another batch holds; err is returned as it is. A failed delete is logged: the
// republisher then finds the key held again and the copy is forgotten at its next attempt.
func (k *keeping) forgetRefused(ctx context.Context, b core.OutgoingBatch, err error) error {
	var ue *core.UniqueError
	if !errors.As(err, &ue) {
		return err
	}
	if ferr := k.l.ForgetBatch(context.WithoutCancel(ctx), b.Queue, b.ID); ferr != nil {
		k.l.log.Warn("txmq ledger: a unique batch left out is still kept", "queue", b.Queue, "batch", b.ID, "error", ferr)
	}
	return err
}
