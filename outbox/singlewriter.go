package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// Handoffs on a database with one writer at a time (SQLite, SingleWriterDialect). A handoff
// (a batch the backend refused at flush time) must be stored beside the app's transactions,
// not inside them: PostgreSQL and MySQL insert it on a connection of its own at once. On
// SQLite an open transaction of the app holds the file's only writer, and the goroutine
// waiting for it may be the one that has to end it (a publish inside the transaction waits
// for the node's flush of the same ordering key, whose handoff waits for the writer). So:
//
//   - a handoff whose ctx carries this store's transaction is written into it
//     (handoffInSQLTx, sqltx.go);
//   - any other handoff is queued here, in order, and written by the first of: a background
//     inserter, which takes the writer (BEGIN IMMEDIATE) and only then takes the queue
//     (SingleWriterDialect.InsertTaken), so that it never holds batches while a transaction
//     stages rows after them; or the next publish staged in a transaction of this store
//     (sqlScope.Stage, appTx.Stage), which writes the queue into the transaction before its
//     own rows. Handoff waits for the batches to be written (until its ctx ends), except that
//     while a transaction of the app may hold the writer in this process (a RunInSQLTx is
//     open, or the app uses WithSQLTx) it returns after singleWriterWait with them still
//     queued: they wait in memory, like the node's publish buffer, and a crash of the
//     process loses them;
//   - HoldsKey counts queued batches as held, so the node's later publishes of their keys
//     follow them into the outbox.

// singleWriterWait is how long Handoff waits for its batches to be written on a single-writer
// database, while a transaction of the app may hold the writer, before it returns with them
// queued.
const singleWriterWait = 250 * time.Millisecond

// SingleWriterDialect is implemented by a Dialect whose database has one writer at a time
// (SQLite: a transaction holds the whole file's write lock); see singlewriter.go for what the
// Store then does with handoffs.
type SingleWriterDialect interface {
	Dialect
	// InsertTaken begins a write transaction, then calls take (once, whatever retries the
	// dialect makes) for the batches to insert as due rows, inserts them in take's order and
	// commits. It returns the batches taken, so that the caller can queue them again when it
	// fails.
	InsertTaken(ctx context.Context, take func() []core.OutgoingBatch) ([]core.OutgoingBatch, error)
}

// queuedHandoff is one Handoff's batches waiting for the writer.
type queuedHandoff struct {
	batches []core.OutgoingBatch
	done    chan struct{} // closed once written (into the table or a transaction)
}

// handoffQueue is the queue of handoffs waiting for the writer.
type handoffQueue struct {
	mu      sync.Mutex
	q       []*queuedHandoff
	keys    map[OrderKey]int // queued batches per ordering key
	running bool             // the inserter runs
	idle    chan struct{}    // closed when the inserter stops; nil while none runs
}

// singleWriter returns the store's dialect as a SingleWriterDialect, if it is one.
func (s *Store) singleWriter() (SingleWriterDialect, bool) {
	sw, ok := s.db.(SingleWriterDialect)
	return sw, ok
}

// queueHandoff queues batches for the writer, starts the inserter, and waits up to
// singleWriterWait (or ctx) for them to be written.
func (s *Store) queueHandoff(ctx context.Context, batches []core.OutgoingBatch) {
	h := &queuedHandoff{batches: batches, done: make(chan struct{})}
	hq := &s.handoffs
	hq.mu.Lock()
	hq.q = append(hq.q, h)
	if hq.keys == nil {
		hq.keys = map[OrderKey]int{}
	}
	for _, b := range batches {
		if b.Key != "" {
			hq.keys[OrderKey{b.Queue, b.Key}]++
		}
	}
	if !hq.running {
		hq.running, hq.idle = true, make(chan struct{})
		go s.insertQueued()
	}
	hq.mu.Unlock()
	t := time.NewTicker(singleWriterWait)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
			if !s.appMayHoldWriter() {
				continue // no transaction of this process can be what the write waits for
			}
			s.log.Warn("txmq outbox: the app database's writer is held, maybe by a transaction of this process; handed-off batches wait in memory for it (a crash of this process loses them)",
				"queues", queueList(batches), "batches", len(batches))
			return
		case <-ctx.Done():
			return
		}
	}
}

// appMayHoldWriter reports whether a transaction of the app on this store's database may be
// open in this process (and so hold the single writer a handoff waits for): a RunInSQLTx
// transaction is open, or the app uses WithSQLTx, whose transactions the store cannot follow.
func (s *Store) appMayHoldWriter() bool {
	return s.sqlTxOpen.Load() > 0 || s.withSQLTxUsed.Load()
}

// takeQueued empties the queue and returns its handoffs and their batches, in order. The
// caller closes each one's done once they are written (written), or queues the batches again.
func (s *Store) takeQueued() ([]*queuedHandoff, []core.OutgoingBatch) {
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	var out []core.OutgoingBatch
	for _, h := range hq.q {
		out = append(out, h.batches...)
	}
	taken := hq.q
	hq.q = nil
	clear(hq.keys)
	return taken, out
}

// written tells the Handoff calls waiting for taken that their batches are written.
func written(taken []*queuedHandoff) {
	for _, h := range taken {
		close(h.done)
	}
}

// requeue puts batches that could not be written back at the head of the queue.
func (s *Store) requeue(batches []core.OutgoingBatch) {
	if len(batches) == 0 {
		return
	}
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	h := &queuedHandoff{batches: batches, done: make(chan struct{})}
	close(h.done) // no one waits for it any more
	hq.q = append([]*queuedHandoff{h}, hq.q...)
	if hq.keys == nil {
		hq.keys = map[OrderKey]int{}
	}
	for _, b := range batches {
		if b.Key != "" {
			hq.keys[OrderKey{b.Queue, b.Key}]++
		}
	}
}

// queuedKey reports whether a batch of queue's ordering key key waits in the queue.
func (s *Store) queuedKey(queue, key string) bool {
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return hq.keys[OrderKey{queue, key}] > 0
}

// queuedKeys adds the keys waiting in the queue to held (HeldKeys).
func (s *Store) queuedKeys(queues []string, held map[string][]string) {
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	for k, n := range hq.keys {
		if n > 0 {
			for _, q := range queues {
				if q == k.Queue {
					held[q] = append(held[q], k.Key)
				}
			}
		}
	}
}

// insertQueued is the inserter: it writes the queue until it is empty, backing off while the
// database fails; after Close it makes one last attempt and logs what it could not write.
func (s *Store) insertQueued() {
	sw, _ := s.singleWriter()
	hq := &s.handoffs
	delay := 50 * time.Millisecond
	for {
		hq.mu.Lock()
		if len(hq.q) == 0 {
			hq.running = false
			close(hq.idle)
			hq.idle = nil
			hq.mu.Unlock()
			return
		}
		hq.mu.Unlock()
		var handoffs []*queuedHandoff
		take := func() []core.OutgoingBatch {
			var batches []core.OutgoingBatch
			handoffs, batches = s.takeQueued()
			return batches
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.PublishTimeout)
		taken, err := sw.InsertTaken(ctx, take)
		cancel()
		written(handoffs) // written, or queued again below: either way no longer theirs to wait for
		if err == nil {
			s.wakeKeyed(taken)
			delay = 50 * time.Millisecond
			continue
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			dropped, rest := s.takeQueued()
			written(dropped)
			lost := append(taken, rest...)
			s.log.Error("txmq outbox: the store is closed and handed-off batches could not be written to the app database; dropped",
				"batches", len(lost), "queues", queueList(lost), "error", err)
			continue
		}
		s.requeue(taken)
		s.log.Warn("txmq outbox: writing handed-off batches failed; retrying", "batches", len(taken), "retry_in", delay, "error", err)
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// handoffIdle returns a channel closed when the inserter stops (nil: none runs).
func (s *Store) handoffIdle() <-chan struct{} {
	s.handoffs.mu.Lock()
	defer s.handoffs.mu.Unlock()
	return s.handoffs.idle
}

// drainQueuedInto writes the queued handoffs into an app transaction (a publish staged there,
// on a single-writer database, goes after them); RunInSQLTx's scope records them as handed.
func (s *Store) drainQueuedInto(ctx context.Context, write func(context.Context, []core.OutgoingBatch) error) ([]core.OutgoingBatch, error) {
	if _, ok := s.singleWriter(); !ok {
		return nil, nil
	}
	s.handoffs.mu.Lock()
	empty := len(s.handoffs.q) == 0
	s.handoffs.mu.Unlock()
	if empty {
		return nil, nil
	}
	taken, batches := s.takeQueued()
	defer written(taken)
	if err := write(ctx, batches); err != nil {
		s.requeue(batches)
		return nil, fmt.Errorf("writing %d handed-off batch(es) queued for the writer into the transaction: %w", len(batches), err)
	}
	return batches, nil
}
