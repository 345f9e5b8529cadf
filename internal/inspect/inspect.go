package inspect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// Inspector is txmq.Inspector's implementation (its doc says what each source answers).
type Inspector struct {
	store   core.MessageStore
	backend core.Backend
	queues  func() []string
	name    string // the backend as named in errors
}

// New returns an Inspector reading store when it is not nil, else backend's native lookup
// over the queues queues returns (every queue the backend holds batches of when nil); name is the
// backend as errors name it (its type when empty).
func New(store core.MessageStore, backend core.Backend, queues func() []string, name string) *Inspector {
	if name == "" {
		name = fmt.Sprintf("%T", backend)
	}
	return &Inspector{store: store, backend: backend, queues: queues, name: name}
}

func (i *Inspector) unsupported(what string) error {
	return fmt.Errorf("%w: backend %s (%s); configure the ledger (Config.Ledger with an app database) to look messages up on any backend", core.ErrLookupUnsupported, i.name, what)
}

// Get returns what is known of the message with id.
func (i *Inspector) Get(ctx context.Context, id string) (core.MessageInfo, error) {
	if i.store != nil {
		return i.store.GetMessage(ctx, id)
	}
	var (
		found core.MessageInfo
		ok    bool
	)
	err := i.scan(ctx, nil, func(m core.MessageInfo, _ core.StoredBatch, _ int) bool {
		if m.ID != id {
			return true
		}
		found, ok = m, true
		return false
	})
	if err != nil {
		return found, err
	}
	if !ok {
		return found, fmt.Errorf("%w: message %q: backend %s holds no batch with it (without a ledger, completed and dead-lettered messages are not known)", core.ErrMessageNotFound, id, i.name)
	}
	return found, nil
}

// List returns the messages f selects, newest published first, at most f.Limit
// (core.DefaultMessageLimit when 0).
func (i *Inspector) List(ctx context.Context, f core.MessageFilter) ([]core.MessageInfo, error) {
	if f.State != "" && !slices.Contains(core.MessageStates, f.State) {
		return nil, fmt.Errorf("%w: message state %q; use one of %s", core.ErrInvalidConfig, f.State, statesList())
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("%w: limit %d; use a number > 0 (0: %d)", core.ErrInvalidConfig, f.Limit, core.DefaultMessageLimit)
	}
	if i.store != nil {
		return i.store.ListMessages(ctx, f)
	}
	var queues []string
	if f.Queue != "" {
		queues = []string{f.Queue}
	}
	var out []core.MessageInfo
	err := i.scan(ctx, queues, func(m core.MessageInfo, _ core.StoredBatch, _ int) bool {
		if (f.State == "" || m.State == f.State) && (f.Since.IsZero() || !m.PublishedAt.Before(f.Since)) && (f.Until.IsZero() || m.PublishedAt.Before(f.Until)) {
			out = append(out, m)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b core.MessageInfo) int {
		if c := b.PublishedAt.Compare(a.PublishedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	limit := f.Limit
	if limit == 0 {
		limit = core.DefaultMessageLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Cancel cancels the message with id unless it completed, and returns what is known of it
// now. With a ledger it works on every backend: nodes leave a cancelled message out of its
// batch before the listener sees it, and ack a batch left empty. Without one it needs an
// adapter implementing core.BatchEditor (memory): the message is taken out of its stored
// batch, which must not be running. A running batch is never interrupted.
func (i *Inspector) Cancel(ctx context.Context, id string) (core.MessageInfo, error) {
	if i.store != nil {
		return i.store.CancelMessage(ctx, id)
	}
	editor, ok := i.backend.(core.BatchEditor)
	if !ok {
		if _, ok := i.backend.(core.BatchInspector); ok {
			return core.MessageInfo{}, fmt.Errorf("%w: backend %s cannot take a message back; configure the ledger (Config.Ledger) to cancel on any backend", core.ErrLookupUnsupported, i.name)
		}
		return core.MessageInfo{}, i.unsupported("cancel")
	}
	var (
		found core.MessageInfo
		batch core.StoredBatch
		index = -1
	)
	err := i.scan(ctx, nil, func(m core.MessageInfo, b core.StoredBatch, idx int) bool {
		if m.ID != id {
			return true
		}
		found, batch, index = m, b, idx
		batch.Body = slices.Clone(b.Body)
		return false
	})
	if err != nil {
		return found, err
	}
	if index < 0 {
		return found, fmt.Errorf("%w: message %q: backend %s holds no batch with it (completed, dead-lettered or never published)", core.ErrMessageNotFound, id, i.name)
	}
	if batch.State == core.BatchInFlight {
		return found, fmt.Errorf("%w: message %q (queue %q) runs in batch %s; a running batch is not interrupted", core.ErrNotCancellable, id, found.Queue, batch.ID)
	}
	env, err := envelope.Decode(batch.Body)
	if err != nil {
		return found, err
	}
	var body []byte
	if len(env.Messages) > 1 {
		env.KeepMessages(func(i int) bool { return i != index })
		body = envelope.Encode(env)
	}
	if err := editor.ReplaceBatch(ctx, batch.Queue, batch.ID, body); err != nil {
		return found, fmt.Errorf("txmq: cancelling message %q (queue %q, batch %s): %w", id, found.Queue, batch.ID, err)
	}
	found.State, found.UpdatedAt, found.Due = core.StateCancelled, time.Now(), time.Time{}
	return found, nil
}

// scan walks the backend's batches (native lookup) and calls fn per message with its batch
// and its index there, until fn returns false.
func (i *Inspector) scan(ctx context.Context, queues []string, fn func(core.MessageInfo, core.StoredBatch, int) bool) error {
	bi, ok := i.backend.(core.BatchInspector)
	if !ok {
		return i.unsupported("it implements no core.BatchInspector")
	}
	if queues == nil && i.queues != nil {
		queues = i.queues()
	}
	err := bi.InspectBatches(ctx, queues, func(b core.StoredBatch) bool {
		env, err := envelope.Decode(b.Body)
		if err != nil {
			return true // an undecodable batch holds no readable ids
		}
		for k, id := range env.MessageIDs {
			m := core.MessageInfo{ID: id, Queue: b.Queue, BatchID: env.ID, PublishedAt: env.Created, UpdatedAt: env.Created, Runs: env.Attempt, Priority: env.Priority, FairKey: env.FairKey}
			switch b.State {
			case core.BatchReady:
				m.State = core.StateQueued
			case core.BatchDelayed:
				m.State, m.Due = core.StateDelayed, b.Due
				if env.Attempt > 0 {
					m.State = core.StateRetry
				}
			case core.BatchInFlight:
				m.State, m.Runs = core.StateRunning, env.Attempt+b.Deliveries
				if !b.Since.IsZero() {
					m.UpdatedAt = b.Since
				}
			}
			if !fn(m, b, k) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("txmq: looking messages up in backend %s: %w", i.name, err)
	}
	return nil
}

func statesList() string {
	s := make([]string, len(core.MessageStates))
	for i, st := range core.MessageStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}
