package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// Poison rows: a row the backend refuses permanently (an error wrapping core.ErrRejected: too
// large for the backend, invalid) can never be published, and a row that keeps failing with
// other errors for Options.MaxAttempts attempts is not worth retrying forever. Either leaves
// the outbox for the dead-letter table, in the transaction of the page that tried it (so the
// row is never both dead-lettered and still pending), logged and counted (Hooks.DeadLettered);
// the rows behind it in the page are published as usual. An error that also wraps
// core.ErrBackendUnavailable is an outage, never poison: the sweep stops without counting.

// poisonReason returns the dead-letter reason for a row whose attempts-th publish failed with
// err (not an outage), or "" while the row should be retried.
func poisonReason(err error, attempts, budget int) string {
	switch {
	case errors.Is(err, core.ErrBackendUnavailable):
		return ""
	case errors.Is(err, core.ErrRejected):
		return core.ReasonRejected
	case attempts >= budget:
		return core.ReasonPublishExhausted
	}
	return ""
}

// deadLetterRowSQL is the insert of a poison row into the dead-letter table dead: the columns of
// Store.DeadLetter ($10 the batch's replay generation). A batch already there and still dead
// keeps its row (first reason, error and attempts); one replayed since becomes dead again with
// this reason, unless its generation is below the row's replay count (the original, or an
// earlier replay, coming back: see core.DeadLetter.Replays). A new row's replay count starts
// at the generation (a batch replayed before its row was purged), and an update raises it to
// the generation, so that the next replay's generation is above every copy's.
func deadLetterRowSQL(dead string) string {
	return `INSERT INTO ` + dead + ` AS d (queue, batch_id, body, exclusive, reason, last_error,
			attempts, messages, first_failed_at, last_failed_at, replay_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)
		ON CONFLICT (queue, batch_id) WHERE batch_id <> '' DO UPDATE SET
			body = EXCLUDED.body, exclusive = EXCLUDED.exclusive, reason = EXCLUDED.reason,
			last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts, messages = EXCLUDED.messages,
			last_failed_at = GREATEST(d.last_failed_at, EXCLUDED.last_failed_at), replayed_at = NULL,
			replay_count = GREATEST(d.replay_count, EXCLUDED.replay_count)
		WHERE d.replayed_at IS NOT NULL AND d.replay_count <= $10`
}

// deadLetterRow moves r to the dead-letter table in a savepoint of tx. moved is false when
// the database refused the move (logged): the caller then records the failed attempt as
// usual, and the row is tried again later. err is an error that ends the page (the savepoint
// could not even be released or rolled back).
func (s *Store) deadLetterRow(db context.Context, tx PageTx, r row, via, reason string, attempts int, cause error) (moved bool, err error) {
	msgs, replays := 0, 0
	if env, derr := envelope.Decode(r.batch.Body); derr == nil {
		msgs, replays = len(env.Messages), env.Replays
	}
	text := cause.Error()
	if reason == core.ReasonPublishExhausted {
		text = fmt.Sprintf("the outbox's publish failed %d times (Options.MaxAttempts); last error: %s", attempts, text)
	}
	dl := &core.DeadLetter{Queue: r.batch.Queue, BatchID: r.batch.ID, Body: r.batch.Body, Reason: reason,
		Error: errorText(text, maxDeadErrorText), Messages: msgs, Exclusive: r.batch.Exclusive, At: time.Now(), Replays: replays}
	merr, err := tx.MoveToDeadLetters(db, r.id, dl)
	if err != nil {
		return false, fmt.Errorf("txmq outbox: dead-lettering row %d (queue %q): %w", r.id, r.batch.Queue, err)
	}
	if merr != nil {
		s.log.Error("txmq outbox: could not move a poison row to the dead-letter table; it stays and is tried again",
			"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "reason", reason, "error", merr, "publish_error", cause)
		return false, nil
	}
	s.log.Error("txmq outbox: row moved to the dead-letter table; not retried (replay it once fixed)",
		"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "via", via, "reason", reason, "attempts", attempts, "error", cause)
	s.safeHook(func() {
		if s.o.Hooks != nil && s.o.Hooks.DeadLettered != nil {
			s.o.Hooks.DeadLettered(r.batch.Queue, reason)
		}
	})
	return true, nil
}
