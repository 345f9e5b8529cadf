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

	spec  *queueSpec
	clock Clock // the publishing node's clock, on which NotBefore was computed
	// maxBatchBytes is the batch size limit in force when the call was published (0: none).
	maxBatchBytes int
}

// Batches applies the queue's Dedup to the messages of ps, cuts them into batches of at most
// MaxBatchMessages and at most the batch size limit in force at publish (see the package doc's
// size limits), and encodes each. All of ps must be of one queue; messages with different
// NotBefore times go in different batches (in order of first appearance), each with the trace
// context of its first publish. Each batch's Delay is its due time minus the publishing node's
// clock now (now when the Pending was not made by a node). The outbox calls it before commit.
func Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error) {
	return batches(ps, now, true)
}

// dueKey identifies a due time exactly (time.Time is not a safe map key).
type dueKey struct {
	sec  int64
	nsec int
}

func batches(ps []*Pending, now time.Time, dedup bool) ([]OutgoingBatch, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	spec := ps[0].spec
	if spec == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by core", ErrInvalidConfig, ps[0].Queue)
	}
	type group struct {
		due      time.Time
		clock    Clock
		trace    map[string]string
		count    int
		msgs     []Message
		maxBytes int // the lowest batch size limit of its publishes; 0: none
	}
	// First pass: find each publish's group (by exact due time) and count the messages, so
	// that each group's slice is allocated once. Most flushes have a single group.
	var (
		groups []group
		index  map[dueKey]int
		of     = make([]int, len(ps))
	)
	for i, p := range ps {
		if p.spec != spec {
			return nil, fmt.Errorf("%w: Batches got queues %q and %q together; call it per queue", ErrInvalidConfig, spec.name, p.Queue)
		}
		g := len(groups) - 1
		switch {
		case g >= 0 && groups[g].due.Equal(p.NotBefore):
		case g < 0:
			groups = append(groups, group{due: p.NotBefore, clock: p.clock, trace: p.Trace})
			g = 0
		default:
			if index == nil { // a second due time: until now there was one group
				index = map[dueKey]int{{groups[0].due.Unix(), groups[0].due.Nanosecond()}: 0}
			}
			k := dueKey{p.NotBefore.Unix(), p.NotBefore.Nanosecond()}
			var ok bool
			if g, ok = index[k]; !ok {
				g = len(groups)
				index[k] = g
				groups = append(groups, group{due: p.NotBefore, clock: p.clock, trace: p.Trace})
			}
		}
		of[i] = g
		groups[g].count += len(p.Messages)
		if l := p.maxBatchBytes; l > 0 && (groups[g].maxBytes == 0 || l < groups[g].maxBytes) {
			groups[g].maxBytes = l
		}
	}
	for i, p := range ps {
		g := &groups[of[i]]
		if g.msgs == nil {
			g.msgs = make([]Message, 0, g.count)
		}
		g.msgs = append(g.msgs, p.Messages...)
	}
	var out []OutgoingBatch
	for _, g := range groups {
		msgs := g.msgs
		if dedup && spec.dedup != nil {
			var err error
			if msgs, err = spec.dedup(msgs); err != nil {
				return nil, err
			}
		}
		var delay time.Duration
		if !g.due.IsZero() {
			pubNow := now
			if g.clock != nil {
				pubNow = g.clock.Now()
			}
			delay = g.due.Sub(pubNow)
		}
		out = appendBatches(out, spec, msgs, g.due, delay, g.trace, now, g.maxBytes)
	}
	return out, nil
}

// appendBatches slices msgs by the queue's MaxBatchMessages and encodes each slice. due is the
// publisher's due time and delay what is left of it by the publisher's clock; a batch whose
// delay is not positive is due now (zero NotBefore and Delay, no due time in the envelope).
// When maxBytes > 0, slices are also cut so that each encoded batch stays within maxBytes (at
// least one message per batch).
func appendBatches(out []OutgoingBatch, spec *queueSpec, msgs []Message, due time.Time, delay time.Duration, trace map[string]string, now time.Time, maxBytes int) []OutgoingBatch {
	if delay <= 0 {
		due, delay = time.Time{}, 0
	}
	for len(msgs) > 0 {
		n := min(len(msgs), spec.maxBatch)
		if maxBytes > 0 {
			size := envelopeOverhead(spec.name, trace)
			for i := range n {
				size += len(msgs[i].Body) + len(msgs[i].ID) + perMessageOverhead
				if i > 0 && size > maxBytes {
					n = i
					break
				}
			}
		}
		chunk := msgs[:n]
		msgs = msgs[n:]
		env := &Envelope{ID: NewID(), Queue: spec.name, Created: now, Due: due, Trace: trace,
			MessageIDs: make([]string, n), Messages: make([]json.RawMessage, 0, n)}
		for i, m := range chunk {
			env.MessageIDs[i] = m.ID
			env.Messages = append(env.Messages, m.Body)
		}
		out = append(out, OutgoingBatch{ID: env.ID, Queue: spec.name, Body: EncodeEnvelope(env), Delay: delay, NotBefore: due, Exclusive: spec.exclusive, Messages: n})
	}
	return out
}
