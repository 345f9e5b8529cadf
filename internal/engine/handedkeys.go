package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// handedKeys remembers the ordering keys whose earlier batches may wait in the outbox
// (NodeOptions.Handoff), so that a later batch of such a key follows them there rather than
// overtaking them on the backend: after an outage the outbox publishes its rows some time
// after the backend answers again, while new publishes of the key reach it at once. A key is
// followed once this node handed a batch of it to the outbox, once a transaction of this node
// staged a batch of it (its row may be left for the relay or the sweep when its after-commit
// publish fails), and, for keys an earlier node left there, from the outbox's own list read
// before the node's first keyed write (core.KeyLister). A key is forgotten once the outbox,
// asked before a later batch of it is written, holds no row of it, unless it was followed again
// while the question was asked. Only a Handoff that implements core.KeyHolder (the outbox
// Store does) can answer; with another Handoff, keys are not tracked.
type handedKeys struct {
	mu   sync.Mutex
	keys map[[2]string]uint64 // {queue, key} -> the generation of its latest mark
	gen  uint64

	// seeds is, per queue, the read of the keys the outbox holds (seedHandedKeys).
	seeds map[string]*seed
}

// seed is the state of one queue's read of the keys the outbox holds: being read (done is
// closed when it ends), read (done is nil), or failed (tried again from retryAt).
type seed struct {
	reading bool
	done    chan struct{}
	retryAt time.Time
}

// seedRetry is the least time between two reads of the outbox's held keys after one failed.
const seedRetry = time.Second

// add records that a batch of queue and key may wait in the outbox.
func (h *handedKeys) add(queue, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[[2]string]uint64)
	}
	h.gen++
	h.keys[[2]string{queue, key}] = h.gen
}

// mark returns the generation of queue and key's latest mark, and whether it is followed.
func (h *handedKeys) mark(queue, key string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.keys[[2]string{queue, key}]
	return g, ok
}

// forget drops queue and key, unless it was marked again after generation g: the outbox held
// none of its rows when asked, and nothing of it went there since the question.
func (h *handedKeys) forget(queue, key string, g uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := [2]string{queue, key}
	if h.keys[k] == g {
		delete(h.keys, k)
	}
}

// seedHandedKeys reads, once per queue, the ordering keys the outbox holds rows of in queue
// (core.KeyLister) and follows them; concurrent first writes of the queue wait for that one
// read (bounded by ClaimTimeout). A failed read is logged and tried again at the next keyed
// write of the queue, at most every seedRetry; meanwhile keys are written directly (the
// backend is not held up by an app database that does not answer).
func (pb *publisher) seedHandedKeys(ctx context.Context, queue string) {
	n := pb.e
	h := &pb.handed
	kl, ok := n.opts.Handoff.(core.KeyLister)
	if !ok {
		return
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer cancel()
	h.mu.Lock()
	if h.seeds == nil {
		h.seeds = map[string]*seed{}
	}
	sd := h.seeds[queue]
	switch {
	case sd != nil && sd.done == nil: // read
		h.mu.Unlock()
		return
	case sd != nil && sd.reading:
		done := sd.done
		h.mu.Unlock()
		select {
		case <-done:
		case <-qctx.Done():
		}
		return
	case sd != nil && time.Now().Before(sd.retryAt):
		h.mu.Unlock()
		return
	case sd == nil:
		sd = &seed{}
		h.seeds[queue] = sd
	}
	sd.reading, sd.done = true, make(chan struct{})
	h.mu.Unlock()
	var held map[string][]string
	err := safeCall("outbox HeldKeys", func() error {
		var err error
		held, err = kl.HeldKeys(qctx, []string{queue})
		return err
	})
	if err != nil {
		n.log.Warn("txmq: could not read which ordering keys the outbox holds; the queue's keys are written to the backend directly until it answers (batches of a key left in the outbox by an earlier node may be overtaken meanwhile)", "queue", queue, "error", err)
	}
	for _, k := range held[queue] {
		h.add(queue, k)
	}
	h.mu.Lock()
	close(sd.done)
	sd.reading = false
	if err == nil {
		sd.done = nil
	} else {
		sd.retryAt = time.Now().Add(seedRetry)
	}
	h.mu.Unlock()
}

// followsOutbox returns a non-nil error (wrapping core.ErrBackendUnavailable, so the batch is
// handed off without a backend write) when keyed batch b must follow earlier batches of its
// key that wait in the outbox. A failed question counts as "still holds": order first; the
// handoff then meets the same database.
func (pb *publisher) followsOutbox(ctx context.Context, b core.OutgoingBatch) error {
	n := pb.e
	if b.Key == "" {
		return nil
	}
	kh, ok := n.opts.Handoff.(core.KeyHolder)
	if !ok {
		return nil
	}
	pb.seedHandedKeys(ctx, b.Queue)
	g, followed := pb.handed.mark(b.Queue, b.Key)
	if !followed {
		return nil
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer cancel()
	var held bool
	err := safeCall("outbox HoldsKey", func() error {
		var err error
		held, err = kh.HoldsKey(qctx, b.Queue, b.Key)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: not written: asking the outbox whether it still holds earlier batches of ordering key %q failed (%v), so this one follows them there to keep the key's order", core.ErrBackendUnavailable, b.Key, err)
	case held:
		return fmt.Errorf("%w: not written: the outbox still holds earlier batches of ordering key %q, so this one follows them there to keep the key's order", core.ErrBackendUnavailable, b.Key)
	}
	pb.handed.forget(b.Queue, b.Key, g)
	return nil
}

// storeKeyFirst stores the direct publishes of spec's ordering key key that this node made
// before a transaction stages a batch of the key: those still in the coalescing buffer are
// written now (to the backend, or handed to the outbox), and those a flush is writing are
// waited for, so that the transaction's row, published right after its commit, cannot
// overtake them. It costs the staging call one backend write, and only when the key was
// published directly in the last buffer window (or is being flushed); the wait is bounded by
// twice ClaimTimeout. The flush runs on ctx's values (not its cancellation), so that a
// handoff to an outbox whose database has one writer at a time (SQLite), which the
// transaction in ctx holds, can be written into that transaction rather than wait for it.
func (pb *publisher) storeKeyFirst(ctx context.Context, spec *Spec, key string) {
	n := pb.e
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*n.opts.ClaimTimeout)
	defer cancel()
	if qb := pb.buf.takeKey(wctx, spec, key); qb != nil {
		pb.flush(context.WithoutCancel(ctx), []*queueBuffer{qb}, true)
	}
}

// followAfterCommit follows queue and key once tx commits (an app-managed transaction, whose
// commit cannot be observed, at once): the transaction's row may be left in the outbox for the
// relay or the sweep when its after-commit publish fails, and the key's later direct publishes
// must follow it there.
func (pb *publisher) followAfterCommit(tx core.Tx, queue, key string) {
	n := pb.e
	if n.opts.Handoff == nil {
		return
	}
	if !tx.AfterCommit(func() { pb.handed.add(queue, key) }) {
		pb.handed.add(queue, key)
	}
}
