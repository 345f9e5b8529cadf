package outbox

import (
	"context"
	"fmt"
	"slices"
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
//     (handoffInSQLTx, sqltx.go), after the handoffs still queued (below): they were made
//     earlier, and a key's rows are published in id order;
//   - any other handoff is queued here, in order, and written by the first of: a background
//     inserter, which takes the writer (BEGIN IMMEDIATE) and only then takes the queue
//     (SingleWriterDialect.InsertTaken), so that it never holds batches while a transaction
//     stages rows after them; or the next publish staged (or handoff made) in a transaction of
//     this store (writeHandedInto), which writes the queue into the transaction before its
//     own rows. Handoff waits for the batches to be written (until its ctx ends), except that
//     while a transaction of the app may hold the writer in this process (a RunInSQLTx is
//     open, or the app uses WithSQLTx) it returns after singleWriterWait with them still
//     queued: they wait in memory, like the node's publish buffer, and a crash of the
//     process loses them;
//   - HoldsKey counts a handed-off batch as held from the handoff until its row is committed
//     (pending): while queued, while the inserter writes it, and while the app transaction it
//     was written into is open, since other connections see nothing of it before the commit.
//     So the node's later publishes of its key follow it into the outbox instead of overtaking
//     it. A RunInSQLTx transaction settles its batches when it commits (or queues them again
//     when it does not); a WithSQLTx one, whose end the store cannot see, when the inserter
//     next holds the writer, which that transaction held until its end.

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
	done    chan struct{} // closed once written (into the table or a transaction); nil: no one waits
}

// handoffQueue is the queue of handoffs waiting for the writer, and the ordering keys of
// every handed-off batch that other connections cannot see in the table yet.
type handoffQueue struct {
	mu sync.Mutex
	q  []*queuedHandoff
	// pending counts, per ordering key, the handed-off batches not yet committed to the table:
	// queued, being inserted by the inserter, or written into an app transaction that has not
	// ended. HoldsKey reports their keys as held until then, so that no later batch of the
	// key overtakes them in the window between leaving the queue and the commit.
	pending map[OrderKey]int
	// foreign are handed-off batches written into WithSQLTx transactions, whose end the
	// store cannot see: they stay pending until the inserter next holds the writer (any
	// transaction that wrote them has then ended).
	foreign []core.OutgoingBatch
	running bool          // the inserter runs
	idle    chan struct{} // closed when the inserter stops; nil while none runs
}

// singleWriter returns the store's dialect as a SingleWriterDialect, if it is one.
func (s *Store) singleWriter() (SingleWriterDialect, bool) {
	sw, ok := s.db.(SingleWriterDialect)
	return sw, ok
}

// countLocked adds n to the pending count of each keyed batch of batches.
func (hq *handoffQueue) countLocked(batches []core.OutgoingBatch, n int) {
	if hq.pending == nil {
		hq.pending = map[OrderKey]int{}
	}
	for _, b := range batches {
		if b.Key == "" {
			continue
		}
		k := OrderKey{b.Queue, b.Key}
		if hq.pending[k] += n; hq.pending[k] <= 0 {
			delete(hq.pending, k)
		}
	}
}

// settle records that batches, pending, are now committed to the table (or lost).
func (s *Store) settle(batches []core.OutgoingBatch) {
	if len(batches) == 0 {
		return
	}
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.countLocked(batches, -1)
}

// startInserterLocked starts the inserter unless it runs (hq.mu held).
func (s *Store) startInserterLocked() {
	hq := &s.handoffs
	if !hq.running {
		hq.running, hq.idle = true, make(chan struct{})
		go s.insertQueued()
	}
}

// queueHandoff queues batches for the writer, starts the inserter, and waits up to
// singleWriterWait (or ctx) for them to be written.
func (s *Store) queueHandoff(ctx context.Context, batches []core.OutgoingBatch) {
	h := &queuedHandoff{batches: batches, done: make(chan struct{})}
	hq := &s.handoffs
	hq.mu.Lock()
	hq.q = append(hq.q, h)
	hq.countLocked(batches, 1)
	s.startInserterLocked()
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

// takeQueued empties the queue and returns its handoffs and their batches, in order; they
// stay pending. The caller closes each one's done once they are written (written), or queues
// the batches again.
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
	return taken, out
}

// written tells the Handoff calls waiting for taken that their batches are written.
func written(taken []*queuedHandoff) {
	for _, h := range taken {
		if h.done != nil {
			close(h.done)
		}
	}
}

// requeue puts batches that could not be written back at the head of the queue (still
// pending).
func (s *Store) requeue(batches []core.OutgoingBatch) {
	if len(batches) == 0 {
		return
	}
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	h := &queuedHandoff{batches: batches} // no one waits for it any more
	hq.q = append([]*queuedHandoff{h}, hq.q...)
}

// queuedKey reports whether a handed-off batch of queue's ordering key key is pending.
func (s *Store) queuedKey(queue, key string) bool {
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return hq.pending[OrderKey{queue, key}] > 0
}

// queuedKeys adds the keys of pending handed-off batches to held (HeldKeys).
func (s *Store) queuedKeys(queues []string, held map[string][]string) {
	hq := &s.handoffs
	hq.mu.Lock()
	defer hq.mu.Unlock()
	for k, n := range hq.pending {
		if n > 0 && slices.Contains(queues, k.Queue) && !slices.Contains(held[k.Queue], k.Key) {
			held[k.Queue] = append(held[k.Queue], k.Key)
		}
	}
}

// insertQueued is the inserter: it writes the queue until it is empty, backing off while the
// database fails, and settles the foreign batches once it holds the writer; after Close it
// makes one last attempt and logs what it could not write.
func (s *Store) insertQueued() {
	sw, _ := s.singleWriter()
	hq := &s.handoffs
	delay := 50 * time.Millisecond
	for {
		hq.mu.Lock()
		if len(hq.q) == 0 && len(hq.foreign) == 0 {
			hq.running = false
			close(hq.idle)
			hq.idle = nil
			hq.mu.Unlock()
			return
		}
		hq.mu.Unlock()
		var handoffs []*queuedHandoff
		var foreign []core.OutgoingBatch
		take := func() []core.OutgoingBatch {
			var batches []core.OutgoingBatch
			handoffs, batches = s.takeQueued()
			hq.mu.Lock()
			foreign, hq.foreign = hq.foreign, nil
			hq.mu.Unlock()
			return batches
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.PublishTimeout)
		taken, err := sw.InsertTaken(ctx, take)
		cancel()
		// take ran with the writer held: every transaction that wrote the foreign batches
		// has ended (committed: they are in the table; rolled back: lost, as WithSQLTx warns).
		s.settle(foreign)
		written(handoffs) // written, or queued again below: either way no longer theirs to wait for
		if err == nil {
			s.settle(taken)
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
			hq.mu.Lock()
			lost, hq.foreign = append(lost, hq.foreign...), nil
			hq.mu.Unlock()
			s.settle(lost)
			if len(lost) > 0 {
				s.log.Error("txmq outbox: the store is closed and handed-off batches could not be written to the app database; dropped",
					"batches", len(lost), "queues", queueList(lost), "error", err)
			}
			continue
		}
		s.requeue(taken)
		s.log.Warn("txmq outbox: writing handed-off batches failed, or the app database's writer stayed held; retrying", "batches", len(taken), "retry_in", delay, "error", err)
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

// writeHandedInto writes into an app transaction, on a single-writer database, the queued
// handoffs and then own (batches handed off inside that transaction, or nil), so that
// whatever the transaction stages next follows them: the queued handoffs were made earlier,
// and with the transaction holding the writer the inserter cannot write them first. Every
// batch written stays pending (HoldsKey) until the transaction has ended: record receives
// them (a RunInSQLTx frame, which settles them at the end); with a nil record (WithSQLTx,
// whose end the store cannot see) they are settled once the inserter next holds the writer.
// queued is how many queued batches were written.
func (s *Store) writeHandedInto(ctx context.Context, write func(context.Context, []core.OutgoingBatch) error, own []core.OutgoingBatch, record func([]core.OutgoingBatch)) (queued int, err error) {
	if _, ok := s.singleWriter(); !ok {
		return 0, nil
	}
	hq := &s.handoffs
	hq.mu.Lock()
	taken := hq.q
	hq.q = nil
	var batches []core.OutgoingBatch
	for _, h := range taken {
		batches = append(batches, h.batches...)
	}
	queued = len(batches)
	hq.countLocked(own, 1)
	hq.mu.Unlock()
	defer written(taken)
	if queued+len(own) == 0 {
		return 0, nil
	}
	all := append(batches, own...)
	if err := write(ctx, all); err != nil {
		s.requeue(batches)
		s.settle(own) // Handoff fails: the node drops them
		return 0, fmt.Errorf("writing %d handed-off batch(es) into the transaction: %w", len(all), err)
	}
	if record != nil {
		record(all)
		return queued, nil
	}
	hq.mu.Lock()
	hq.foreign = append(hq.foreign, all...)
	s.startInserterLocked()
	hq.mu.Unlock()
	return queued, nil
}
