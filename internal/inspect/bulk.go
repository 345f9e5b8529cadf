package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// BulkStates are the states a bulk cancel (Inspector.CancelWhere) selects from: messages
// waiting to run. A running batch is never interrupted, so StateRunning is not one.
var BulkStates = []core.MessageState{core.StateQueued, core.StateDelayed, core.StateRetry}

// bulkPage is how many messages a bulk cancel lists from the ledger at a time.
const bulkPage = 500

// BulkResult is core.BulkResult, what a bulk action did.
type BulkResult = core.BulkResult

// CanCancel returns nil when the Inspector can cancel messages (a ledger, or a backend
// implementing core.BatchEditor: memory, SQL jobs), else an error wrapping
// ErrLookupUnsupported saying why, for a page or command to show instead of the action.
func (i *Inspector) CanCancel() error {
	if i.store != nil {
		return nil
	}
	if _, ok := i.backend.(core.BatchEditor); ok {
		return nil
	}
	return fmt.Errorf("%w: backend %s cannot take a message back; configure the ledger (Config.Ledger) to cancel on any backend", core.ErrLookupUnsupported, i.name)
}

// CancelWhere cancels every message of f.Queue (required) in f.State (one of BulkStates,
// required) published in f's time range, as Cancel does one; f.Limit is ignored. A message
// claimed, completed or gone meanwhile is skipped, never an error. With a ledger the
// messages are cancelled one by one; else (core.BatchEditor) each batch is edited once,
// taking its selected messages out or removing it when none is left.
func (i *Inspector) CancelWhere(ctx context.Context, f core.MessageFilter) (BulkResult, error) {
	var res BulkResult
	if f.Queue == "" {
		return res, fmt.Errorf("%w: a bulk cancel needs a queue", core.ErrInvalidConfig)
	}
	if !slices.Contains(BulkStates, f.State) {
		return res, fmt.Errorf("%w: a bulk cancel of queue %q needs a state of %v (a running batch is not interrupted), not %q", core.ErrInvalidConfig, f.Queue, BulkStates, f.State)
	}
	if err := i.CanCancel(); err != nil {
		return res, err
	}
	if i.store != nil {
		return i.cancelListed(ctx, f)
	}
	return i.cancelNative(ctx, f)
}

// cancelListed cancels through the ledger, a page of the listing at a time, until a page
// holds no message not seen before.
func (i *Inspector) cancelListed(ctx context.Context, f core.MessageFilter) (BulkResult, error) {
	var res BulkResult
	seen := map[string]bool{}
	f.Limit = bulkPage
	for {
		ms, err := i.store.ListMessages(ctx, f)
		if err != nil {
			return res, fmt.Errorf("txmq: cancelling messages of queue %q after %d: %w", f.Queue, res.Done, err)
		}
		fresh := 0
		for _, m := range ms {
			if seen[m.ID] {
				continue
			}
			seen[m.ID] = true
			fresh++
			_, err := i.store.CancelMessage(ctx, m.ID)
			switch {
			case err == nil:
				res.Done++
			case errors.Is(err, core.ErrNotCancellable) || errors.Is(err, core.ErrMessageNotFound):
				res.Skipped++
			default:
				return res, fmt.Errorf("txmq: cancelling message %q of queue %q after %d: %w", m.ID, f.Queue, res.Done, err)
			}
		}
		if fresh == 0 || len(ms) < bulkPage {
			return res, nil
		}
	}
}

// edit is one batch a native bulk cancel changes: its stored body and the messages to drop.
type edit struct {
	batch core.StoredBatch
	drop  []int
}

// cancelNative edits each batch holding selected messages once (core.BatchEditor).
func (i *Inspector) cancelNative(ctx context.Context, f core.MessageFilter) (BulkResult, error) {
	var (
		res   BulkResult
		edits []*edit
		byID  = map[string]*edit{}
	)
	err := i.scan(ctx, []string{f.Queue}, func(m core.MessageInfo, b core.StoredBatch, idx int) bool {
		if m.State != f.State || (!f.Since.IsZero() && m.PublishedAt.Before(f.Since)) || (!f.Until.IsZero() && !m.PublishedAt.Before(f.Until)) {
			return true
		}
		e := byID[b.ID]
		if e == nil {
			b.Body = slices.Clone(b.Body)
			e = &edit{batch: b}
			byID[b.ID] = e
			edits = append(edits, e)
		}
		e.drop = append(e.drop, idx)
		return true
	})
	if err != nil {
		return res, err
	}
	editor := i.backend.(core.BatchEditor)
	for _, e := range edits {
		env, err := envelope.Decode(e.batch.Body)
		if err != nil {
			return res, err
		}
		var body []byte
		if len(e.drop) < len(env.Messages) {
			env.KeepMessages(func(k int) bool { return !slices.Contains(e.drop, k) })
			body = envelope.Encode(env)
		}
		err = editor.ReplaceBatch(ctx, e.batch.Queue, e.batch.ID, body)
		switch {
		case err == nil:
			res.Done += len(e.drop)
		case errors.Is(err, core.ErrNotCancellable) || errors.Is(err, core.ErrMessageNotFound):
			res.Skipped += len(e.drop)
		default:
			return res, fmt.Errorf("txmq: cancelling messages of queue %q (batch %s) after %d: %w", f.Queue, e.batch.ID, res.Done, err)
		}
	}
	return res, nil
}
