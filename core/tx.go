package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Tx is an app database transaction that publishes can join. The outbox package implements it
// for pgx and database/sql; core routes publishes into it by the queue's Transactional setting.
// Put one in a context with ContextWithTx.
type Tx interface {
	// Stage takes the messages of one publish call on a Require or Try queue. The transaction
	// writes them as outbox rows before it commits (now, or in a before-commit step), so they
	// are published if and only if it commits. An error fails the publish call.
	Stage(ctx context.Context, p *Pending) error
	// AfterCommit registers fn to run once after the transaction commits, never on rollback.
	// It returns false when the transaction cannot tell when it commits (an app-managed
	// transaction), in which case Never queues cannot be published inside it.
	AfterCommit(fn func()) bool
}

type txKey struct{}

// ContextWithTx returns ctx carrying tx, so publishes made with it join the transaction.
func ContextWithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction carried by ctx, if any.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
}

// Pending is the encoded messages of one publish call (or several, merged) for one queue and due
// time, before they are cut into batches.
type Pending struct {
	// Queue is the queue name.
	Queue string
	// Messages are the encoded messages, with their ids.
	Messages []Message
	// NotBefore is the earliest delivery time; zero means now.
	NotBefore time.Time
	// Trace is the publisher's trace context, if any.
	Trace map[string]string

	spec *queueSpec
}

// Batches applies the queue's Dedup to the messages of ps, cuts them into batches of at most
// MaxBatchMessages and encodes each. All of ps must be of one queue; messages with different
// NotBefore times go in different batches. The outbox calls it before commit.
func Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	spec := ps[0].spec
	if spec == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by core", ErrInvalidConfig, ps[0].Queue)
	}
	type group struct {
		due   time.Time
		trace map[string]string
		msgs  []Message
	}
	var groups []*group
	for _, p := range ps {
		if p.spec != spec {
			return nil, fmt.Errorf("%w: Batches got queues %q and %q together; call it per queue", ErrInvalidConfig, spec.name, p.Queue)
		}
		var g *group
		for _, cand := range groups {
			if cand.due.Equal(p.NotBefore) {
				g = cand
				break
			}
		}
		if g == nil {
			g = &group{due: p.NotBefore, trace: p.Trace}
			groups = append(groups, g)
		}
		g.msgs = append(g.msgs, p.Messages...)
	}
	var out []OutgoingBatch
	for _, g := range groups {
		msgs := g.msgs
		if spec.dedup != nil {
			var err error
			if msgs, err = spec.dedup(msgs); err != nil {
				return nil, err
			}
		}
		out = appendBatches(out, spec, msgs, g.due, g.trace, now)
	}
	return out, nil
}

// appendBatches slices msgs by the queue's MaxBatchMessages and encodes each slice.
func appendBatches(out []OutgoingBatch, spec *queueSpec, msgs []Message, due time.Time, trace map[string]string, now time.Time) []OutgoingBatch {
	for len(msgs) > 0 {
		n := min(len(msgs), spec.maxBatch)
		chunk := msgs[:n]
		msgs = msgs[n:]
		env := &Envelope{ID: NewID(), Queue: spec.name, Created: now, Trace: trace,
			MessageIDs: make([]string, n), Messages: make([]json.RawMessage, 0, n)}
		for i, m := range chunk {
			env.MessageIDs[i] = m.ID
			env.Messages = append(env.Messages, m.Body)
		}
		out = append(out, OutgoingBatch{ID: env.ID, Queue: spec.name, Body: EncodeEnvelope(env), NotBefore: due, Exclusive: spec.exclusive, Messages: n})
	}
	return out
}
