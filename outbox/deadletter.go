package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// ErrAlreadyReplayed means a dead letter was replayed already and has not failed since.
var ErrAlreadyReplayed = errors.New("txmq outbox: dead letter already replayed")

// DLQState selects dead letters by replay state.
type DLQState int

const (
	// DLQAll selects every dead letter (the zero value).
	DLQAll DLQState = iota
	// DLQDead selects dead letters not replayed since they last failed.
	DLQDead
	// DLQReplayed selects dead letters replayed and not failed again since.
	DLQReplayed
)

// DLQFilter selects dead letters. Zero fields select everything.
type DLQFilter struct {
	// Queue selects one queue; empty means every queue.
	Queue string
	// AfterID selects ids greater than it (keyset paging: pass the last id seen).
	AfterID int64
	// Limit caps the rows: ListDeadLetters defaults to 100; Purge to no cap.
	Limit int
	// State selects by replay state; default DLQAll.
	State DLQState
}

// DeadLetterRow is one stored dead letter.
type DeadLetterRow struct {
	// ID is the row id.
	ID int64
	// Queue is the batch's queue.
	Queue string
	// BatchID is the batch id (empty if the batch could not be decoded).
	BatchID string
	// Body is the batch as stored (envelope.Decode reads it).
	Body []byte
	// Exclusive is the queue's Exclusive setting when the batch was stored.
	Exclusive bool
	// Reason is a core.Reason constant.
	Reason string
	// LastError is the last error's text (invalid UTF-8 and NUL bytes replaced, at most 64 KiB).
	LastError string
	// Attempts is the number of runs spent.
	Attempts int
	// Messages is the number of messages in the batch.
	Messages int
	// FirstFailedAt and LastFailedAt are when the engine first and last gave up on the batch.
	FirstFailedAt, LastFailedAt time.Time
	// ReplayCount is how many times the batch was replayed. A row made for a batch that had
	// been replayed before (its earlier row purged) starts at the batch's replay generation.
	ReplayCount int
	// ReplayedAt is the last replay, zero if it is dead now (never replayed, or failed again
	// since).
	ReplayedAt time.Time
}

// Dead reports whether the row is dead now (not replayed since it last failed).
func (r *DeadLetterRow) Dead() bool { return r.ReplayedAt.IsZero() }

// DeadLetter stores a batch the engine gave up on. Inserting is idempotent on the batch id: a batch
// already stored and still dead (same queue and batch id, not replayed since) keeps its row, with
// the first reason, error and attempts, and the call returns an error wrapping
// core.ErrAlreadyDeadLettered, so that core does not call OnError a second time. A batch that
// was replayed and failed again (dl.Replays, its replay generation, at least the row's replay
// count) has its row updated and becomes dead again; one of an earlier generation is the
// original, or an earlier replay, coming back after its Drop failed: the row is kept and the
// call answers core.ErrAlreadyDeadLettered. It implements core.DeadLetterSink.
func (s *Store) DeadLetter(ctx context.Context, dl *core.DeadLetter) error {
	if s == nil {
		return errNoStore("DeadLetter")
	}
	if dl == nil {
		return nil
	}
	at := dl.At
	if at.IsZero() {
		at = time.Now()
	}
	stored, err := s.db.DeadLetter(ctx, &core.DeadLetter{Queue: dl.Queue, BatchID: dl.BatchID, Body: dl.Body,
		Exclusive: dl.Exclusive, Reason: dl.Reason, Error: errorText(dl.Error, maxDeadErrorText), Attempts: dl.Attempts,
		Messages: dl.Messages, At: at, Replays: dl.Replays})
	if err != nil {
		return fmt.Errorf("txmq outbox: storing dead letter of queue %q (batch %s, reason %s) in %s: %w; check the app database and that outbox.Migrate ran",
			dl.Queue, dl.BatchID, dl.Reason, s.dead, err)
	}
	if !stored {
		return fmt.Errorf("txmq outbox: queue %q batch %s is already a dead letter in %s (its first reason, error and attempts are kept): %w",
			dl.Queue, dl.BatchID, s.dead, core.ErrAlreadyDeadLettered)
	}
	return nil
}

const deadCols = `id, queue, batch_id, body, exclusive, reason, last_error, attempts, messages,
	first_failed_at, last_failed_at, replay_count, replayed_at`

// where builds the WHERE clause of f and its arguments, with ph writing the placeholder of
// the n-th argument (1-based). Dialects of this and other modules build on it through
// DLQFilter.SQL.
func (f DLQFilter) where(ph func(n int) string) (string, []any) {
	conds := []string{"id > " + ph(1)}
	args := []any{f.AfterID}
	if f.Queue != "" {
		args = append(args, f.Queue)
		conds = append(conds, "queue = "+ph(len(args)))
	}
	switch f.State {
	case DLQDead:
		conds = append(conds, "replayed_at IS NULL")
	case DLQReplayed:
		conds = append(conds, "replayed_at IS NOT NULL")
	}
	return strings.Join(conds, " AND "), args
}

// SQL returns the WHERE condition of f (without the word WHERE) and its arguments, with ph
// writing the placeholder of the n-th argument (1-based): for a Dialect.
func (f DLQFilter) SQL(ph func(n int) string) (string, []any) { return f.where(ph) }

// ofQueue returns " of queue "q"" for messages, or "" when f selects every queue.
func (f DLQFilter) ofQueue() string {
	if f.Queue == "" {
		return ""
	}
	return fmt.Sprintf(" of queue %q", f.Queue)
}

// ListDeadLetters returns the dead letters f selects, by ascending id (default limit 100).
func (s *Store) ListDeadLetters(ctx context.Context, f DLQFilter) ([]DeadLetterRow, error) {
	if s == nil {
		return nil, errNoStore("ListDeadLetters")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	out, err := s.db.ListDeadLetters(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: listing dead letters%s from %s: %w", f.ofQueue(), s.dead, err)
	}
	return out, nil
}

// GetDeadLetter returns one dead letter, or an error wrapping ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (*DeadLetterRow, error) {
	if s == nil {
		return nil, errNoStore("GetDeadLetter")
	}
	d, err := s.db.GetDeadLetter(ctx, id)
	if err == nil {
		return d, nil
	}
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("txmq outbox: no dead letter %d in %s (txmq dlq ls lists them): %w", id, s.dead, ErrNotFound)
	}
	return nil, fmt.Errorf("txmq outbox: reading dead letter %d from %s: %w", id, s.dead, err)
}

// Replay publishes dead letter id to the backend again, with its attempt count reset to 0 (a
// full retry budget), and marks it replayed (replay_count+1, replayed_at). The row stays, as
// history, until Purge; if the batch fails again, DeadLetter marks it dead again. The row is
// locked while it is published, so concurrent replays of one id publish it once; a row already
// replayed (and not failed since) is refused with ErrAlreadyReplayed. A publish error leaves the
// row dead and is returned; so does a backend that keeps one batch per id while the original
// (dead-lettered, its Drop not landed) is still under a live lease: the error wraps
// core.ErrStillStored, and a replay once that lease has ended succeeds (publishReplay then
// removes the original, if it is still stored, through core.BatchEditor). The
// replayed batch carries a replay generation one above any before it, so the node that
// dead-lettered the original runs it (and, if it fails for good again, dead-letters it again)
// instead of taking it for the original coming back.
func (s *Store) Replay(ctx context.Context, id int64) error {
	if s == nil {
		return errNoStore("Replay")
	}
	var queue string
	replay := func(d *DeadLetterRow) error {
		queue = d.Queue
		if !d.Dead() {
			return fmt.Errorf("txmq outbox: dead letter %d (queue %q, batch %s) was replayed at %s and has not failed since: %w",
				id, d.Queue, d.BatchID, d.ReplayedAt.Format(time.RFC3339), ErrAlreadyReplayed)
		}
		env, err := envelope.Decode(d.Body)
		if err != nil {
			return fmt.Errorf("txmq outbox: dead letter %d of queue %q (reason %s) is not a readable batch and cannot be replayed; inspect it and purge it: %w",
				id, d.Queue, d.Reason, err)
		}
		// The replay's generation grows with every replay of the row and of the batch, so a
		// node that dead-lettered an earlier generation runs this one (see envelope.Replays).
		gen := max(env.Replays, d.ReplayCount) + 1
		body := envelope.EncodeReplay(env, gen)
		if env.Queue != d.Queue {
			return fmt.Errorf("%w: txmq outbox: dead letter %d is stored under queue %q but its batch names queue %q; not replayed",
				core.ErrUndecodable, id, d.Queue, env.Queue)
		}
		// A replayed batch of an ordered queue goes to the back of its key. Its publish has an
		// identity of its own: a backend that drops repeated publishes of a batch id (SQS FIFO,
		// for five minutes) must not take the replay for a repeat of the original publish.
		b := core.OutgoingBatch{ID: env.ID, Queue: d.Queue, Body: body, Exclusive: d.Exclusive, Key: env.Key,
			Priority: env.Priority, Lead: time.Duration(env.LeadMicros) * time.Microsecond, FairKey: env.FairKey,
			PublishID: fmt.Sprintf("%s-replay-%d", env.ID, gen)}
		pctx, cancel := context.WithTimeout(ctx, s.o.PublishTimeout)
		err = s.publishReplay(pctx, b)
		cancel()
		if errors.Is(err, core.ErrStillStored) {
			return fmt.Errorf("txmq outbox: replaying dead letter %d (queue %q, batch %s): the backend still holds the original batch under a live lease (it was dead-lettered but its drop did not land); replay again once that lease ends; the row stays dead: %w",
				id, d.Queue, env.ID, err)
		}
		if err != nil {
			return fmt.Errorf("txmq outbox: replaying dead letter %d (queue %q, batch %s): the backend refused it, the row stays dead; retry later: %w",
				id, d.Queue, env.ID, err)
		}
		return nil
	}
	var fnErr error
	err := s.db.ReplayDeadLetter(ctx, id, func(d *DeadLetterRow) error { fnErr = replay(d); return fnErr })
	switch {
	case err == nil:
		return nil
	case fnErr != nil && errors.Is(err, fnErr):
		return err
	case errors.Is(err, ErrMarkReplayed):
		return fmt.Errorf("txmq outbox: dead letter %d (queue %q) was republished but marking it replayed failed (it may be replayed twice): %w", id, queue, err)
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("txmq outbox: replaying dead letter %d: %w", id, ErrNotFound)
	}
	return fmt.Errorf("txmq outbox: replaying dead letter %d: %w", id, err)
}

// publishReplay publishes a replay. A backend that keeps one batch per id and still stores
// the original (dead-lettered, its Drop not landed) refuses it with core.ErrStillStored; the
// original is then removed as a cancel removes a batch (core.BatchEditor: an ordered key's
// next batch moves up), unless it is in flight, and the replay published again, due now at
// the back of its key like any publish. An original in flight keeps the refusal: its holder
// may still settle it.
func (s *Store) publishReplay(ctx context.Context, b core.OutgoingBatch) error {
	err := s.publishOne(ctx, b)
	ed, ok := s.backend.(core.BatchEditor)
	if !ok || !errors.Is(err, core.ErrStillStored) {
		return err
	}
	switch rerr := ed.ReplaceBatch(ctx, b.Queue, b.ID, nil); {
	case rerr == nil, errors.Is(rerr, core.ErrMessageNotFound):
		return s.publishOne(ctx, b)
	case errors.Is(rerr, core.ErrNotCancellable):
		return err
	default:
		return fmt.Errorf("removing the stored original to replay it: %w", rerr)
	}
}

// ErrMarkReplayed is wrapped by a Dialect's ReplayDeadLetter in the error of the statement
// that marks a replayed dead letter, after its fn succeeded.
var ErrMarkReplayed = errors.New("marking the dead letter replayed")

// ReplayQueue replays every dead (not yet replayed) letter of queue, oldest first, and returns
// how many it replayed. A backend reported unavailable stops it at once; other per-row errors
// (an unreadable batch) are collected and the rest is replayed.
func (s *Store) ReplayQueue(ctx context.Context, queue string) (int, error) {
	if s == nil {
		return 0, errNoStore("ReplayQueue")
	}
	if queue == "" {
		return 0, fmt.Errorf("%w: txmq outbox: ReplayQueue needs a queue name", core.ErrInvalidConfig)
	}
	var (
		after    int64
		replayed int
		errs     []error
	)
	for {
		page, err := s.ListDeadLetters(ctx, DLQFilter{Queue: queue, AfterID: after, Limit: 100, State: DLQDead})
		if err != nil {
			return replayed, errors.Join(append(errs, err)...)
		}
		for _, d := range page {
			after = d.ID
			err := s.Replay(ctx, d.ID)
			switch {
			case err == nil:
				replayed++
			case errors.Is(err, ErrAlreadyReplayed), errors.Is(err, ErrNotFound):
				// replayed or purged concurrently
			case errors.Is(err, core.ErrBackendUnavailable), ctx.Err() != nil:
				return replayed, errors.Join(append(errs, err)...)
			default:
				errs = append(errs, err)
			}
		}
		if len(page) < 100 {
			return replayed, errors.Join(errs...)
		}
	}
}

// Purge deletes the dead letters f selects (Limit 0: all of them) and returns how many.
func (s *Store) Purge(ctx context.Context, f DLQFilter) (int64, error) {
	if s == nil {
		return 0, errNoStore("Purge")
	}
	n, err := s.db.PurgeDeadLetters(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("txmq outbox: purging dead letters (queue %q) from %s: %w", f.Queue, s.dead, err)
	}
	return n, nil
}
