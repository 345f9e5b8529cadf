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
	// Key is the ordering key of an ordered queue's publish (empty otherwise): batches hold
	// the messages of one key only, in the order the key's publishes were made or staged.
	Key string

	// Batcher is what cuts this publish into batches: the queue's settings, the publishing
	// node's clock (on which NotBefore was computed) and the size limits in force when the call
	// was published. The node that made the Pending sets it; a Tx passes it on untouched.
	Batcher Batcher
}

// Batcher cuts the Pendings of one queue into encoded batches. The engine implements it; a Tx
// (the outbox) reaches it through Batches.
type Batcher interface {
	// Batches cuts ps (all of one queue) into batches; see the package function Batches.
	Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error)
}

// Batches applies the queue's Dedup to the messages of ps, cuts them into batches of at most
// MaxBatchMessages and at most the batch size limit in force at publish (see the package doc's
// size limits), and encodes each. All of ps must be of one queue; messages with different
// NotBefore times (or, on an ordered queue, different keys) go in different batches (in order of first appearance; on an ordered queue in publish order per key); each batch
// keeps the trace context of each of its messages (that of its publish). Each batch's Delay is its due time minus the publishing node's
// clock now (now when the Pending was not made by a node). The outbox calls it before commit.
func Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if ps[0].Batcher == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by a node (no Batcher)", ErrInvalidConfig, ps[0].Queue)
	}
	return ps[0].Batcher.Batches(ps, now)
}

// Message is one encoded message of a publish call.
type Message struct {
	// ID is the message id, assigned at publish.
	ID string
	// Body is the message's JSON.
	Body json.RawMessage
}
