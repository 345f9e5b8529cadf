package outbox

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
)

// Ordered queues. A row of an ordered queue carries its batch's ordering key (the order_key
// column). Whoever publishes rows (the after-commit publishers, the relay, the sweep, in this
// process or another) publishes a keyed row only when every earlier row (lower id) of its queue
// and key still in the table was published (or dead-lettered) earlier in the same pass, in id
// order; otherwise the row waits, without an attempt counted, for a later pass. A row that
// fails blocks the rest of its key for the pass. Ids follow the order in which rows were
// inserted, so a key's batches are published in staging order within a transaction and in
// commit order across transactions that commit one after the other; two transactions that
// stage the same key concurrently have no defined order between them.

// orderKey names a key of a queue.
type orderKey = OrderKey

// keyIDsFunc reads the ids of the rows of keys up to an id (PageTx.KeyIDs).
type keyIDsFunc func(ctx context.Context, upto map[OrderKey]int64) (map[OrderKey][]int64, error)

// orderGuard says which keyed rows of a pass may be published now (see above).
type orderGuard struct {
	ids     map[orderKey][]int64 // per key, the ids in the table up to the pass's last, in order
	blocked map[orderKey]bool
}

// newOrderGuard reads, for the keyed rows of rows, the ids of their keys in the table up to
// the highest id of each key in rows (one statement, an index access per key). It returns nil
// when rows holds no keyed row.
func (s *Store) newOrderGuard(ctx context.Context, keyIDs keyIDsFunc, rows []row) (*orderGuard, error) {
	upto := map[orderKey]int64{}
	for _, r := range rows {
		if r.batch.Key != "" {
			k := orderKey{r.batch.Queue, r.batch.Key}
			upto[k] = max(upto[k], r.id)
		}
	}
	if len(upto) == 0 {
		return nil, nil
	}
	ids, err := keyIDs(ctx, upto)
	if err != nil {
		return nil, fmt.Errorf("reading the earlier rows of %d ordering key(s): %w", len(upto), err)
	}
	return &orderGuard{ids: ids, blocked: map[orderKey]bool{}}, nil
}

// may reports whether r may be published now: it has no key, or it is the first row of its
// key left in the table (earlier ones done in this pass) and its key is not blocked. A row
// that may not blocks its key for the rest of the pass.
func (g *orderGuard) may(r row) bool {
	if g == nil || r.batch.Key == "" {
		return true
	}
	k := orderKey{r.batch.Queue, r.batch.Key}
	if g.blocked[k] {
		return false
	}
	if ids := g.ids[k]; len(ids) == 0 || ids[0] != r.id {
		g.blocked[k] = true
		return false
	}
	return true
}

// done records that r left the table in this pass (published or dead-lettered): the next row
// of its key may go.
func (g *orderGuard) done(r row) {
	if g == nil || r.batch.Key == "" {
		return
	}
	k := orderKey{r.batch.Queue, r.batch.Key}
	if ids := g.ids[k]; len(ids) > 0 && ids[0] == r.id {
		g.ids[k] = ids[1:]
	}
}

// block stops r's key for the rest of the pass (r failed).
func (g *orderGuard) block(r row) {
	if g == nil || r.batch.Key == "" {
		return
	}
	g.blocked[orderKey{r.batch.Queue, r.batch.Key}] = true
}

var (
	_ core.KeyHolder = (*Store)(nil)
	_ core.KeyLister = (*Store)(nil)
)

// HoldsKey implements core.KeyHolder: whether the outbox table holds a row of queue with
// ordering key key (one index access). A node asks it before it writes a batch of a key it
// handed to the outbox earlier, so that the batch follows those rows rather than overtaking
// them (the rows are published in id order; see above).
func (s *Store) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	if s == nil {
		return false, errNoStore("HoldsKey")
	}
	if s.queuedKey(queue, key) { // a handoff waiting for a single-writer database
		return true, nil
	}
	held, err := s.db.HoldsKey(ctx, queue, key)
	if err != nil {
		return false, fmt.Errorf("txmq outbox: does the outbox table %s hold rows of queue %q, ordering key %q: %w", s.outbox, queue, key, err)
	}
	return held, nil
}

// HeldKeys implements core.KeyLister: per queue of queues, the ordering keys the outbox table
// holds rows of (one index scan per queue). A node asks it once per ordered queue, before its
// first keyed write, so that its direct publishes follow the rows an earlier node left there.
func (s *Store) HeldKeys(ctx context.Context, queues []string) (map[string][]string, error) {
	if s == nil {
		return nil, errNoStore("HeldKeys")
	}
	held, err := s.db.HeldKeys(ctx, queues)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: which ordering keys does the outbox table %s hold rows of, for queue(s) %v: %w", s.outbox, queues, err)
	}
	s.queuedKeys(queues, held)
	return held, nil
}
