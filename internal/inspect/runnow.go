package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// RunNowStates are the states Inspector.RunNow selects from: messages waiting for a due or a
// retry time.
var RunNowStates = []core.MessageState{core.StateDelayed, core.StateRetry}

// CanRunNow returns nil when the Inspector can make waiting messages due now: the backend
// looks batches up (core.BatchInspector) and expedites them (core.BatchExpediter: memory, SQL
// jobs on PostgreSQL), ledger or not; else an error wrapping ErrLookupUnsupported saying why.
func (i *Inspector) CanRunNow() error {
	_, look := i.backend.(core.BatchInspector)
	_, exp := i.backend.(core.BatchExpediter)
	if look && exp {
		return nil
	}
	return fmt.Errorf("%w: backend %s cannot make a waiting batch due now (core.BatchExpediter: memory and SQL jobs on PostgreSQL or MySQL can)", core.ErrLookupUnsupported, i.name)
}

// RunNow makes every batch of f.Queue (required) holding messages in f.State (one of
// RunNowStates, required) and published in f's time range due now, so that a node claims it
// at once; f.Limit is ignored. The batch runs whole, with its attempt count unchanged (a
// retry keeps its budget). A batch held behind its ordering key still waits for the key. A
// batch claimed or gone meanwhile is skipped, never an error. The result counts messages.
func (i *Inspector) RunNow(ctx context.Context, f core.MessageFilter) (BulkResult, error) {
	var res BulkResult
	if f.Queue == "" {
		return res, fmt.Errorf("%w: run now needs a queue", core.ErrInvalidConfig)
	}
	if !slices.Contains(RunNowStates, f.State) {
		return res, fmt.Errorf("%w: run now of queue %q needs a state of %v, not %q", core.ErrInvalidConfig, f.Queue, RunNowStates, f.State)
	}
	if err := i.CanRunNow(); err != nil {
		return res, err
	}
	var (
		ids    []string
		count  = map[string]int{}
		bodies = map[string][]byte{}
	)
	err := i.scan(ctx, []string{f.Queue}, func(m core.MessageInfo, b core.StoredBatch, _ int) bool {
		if m.State != f.State || (!f.Since.IsZero() && m.PublishedAt.Before(f.Since)) || (!f.Until.IsZero() && !m.PublishedAt.Before(f.Until)) {
			return true
		}
		if count[b.ID] == 0 {
			ids = append(ids, b.ID)
			bodies[b.ID] = slices.Clone(b.Body)
		}
		count[b.ID]++
		return true
	})
	if err != nil {
		return res, err
	}
	exp := i.backend.(core.BatchExpediter)
	for _, id := range ids {
		env, err := envelope.Decode(bodies[id])
		if err != nil {
			return res, err
		}
		env.Due = time.Time{} // due now: the engine gives back a batch delivered before env.Due
		err = exp.ExpediteBatch(ctx, f.Queue, id, envelope.Encode(env))
		switch {
		case err == nil:
			res.Done += count[id]
		case errors.Is(err, core.ErrNotCancellable) || errors.Is(err, core.ErrMessageNotFound):
			res.Skipped += count[id]
		default:
			return res, fmt.Errorf("txmq: running messages of queue %q now (batch %s) after %d: %w", f.Queue, id, res.Done, err)
		}
	}
	return res, nil
}
