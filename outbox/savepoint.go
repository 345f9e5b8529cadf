package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// A RunInTx transaction keeps the messages staged in it (Require and Try queues) and its
// after-commit callbacks (Never queues) in memory until it commits. To follow the business
// rows through savepoints, it keeps them in frames that mirror the database's savepoints: the
// root frame is the transaction, and every savepoint made through the pgx.Tx handed out by
// RunInTx (its Begin, so also pgx.BeginFunc on it, at any depth), by Store.Savepoint or by a
// nested RunInTx pushes one. Work goes to the innermost open frame, where the database puts
// the statements run at that moment, whichever context or handle it came through. A released
// savepoint merges its frame, and every frame opened after it, into the frame below it
// (RELEASE SAVEPOINT releases the later savepoints too); a rolled-back one drops them (ROLLBACK
// TO SAVEPOINT undoes the later ones too). At COMMIT every open frame counts as released.
//
// SAVEPOINT statements run through Exec on that tx are followed too (rawsavepoint.go);
// savepoints made on tx.Conn(), through Query or SendBatch, or inside a multi-statement
// string are invisible here: messages staged after them are kept when they are rolled back.

var (
	_ pgx.Tx  = (*scopedTx)(nil)
	_ core.Tx = (*scopedTx)(nil)
)

// frame is the work staged in one level of a RunInTx transaction.
type frame struct {
	staged []*core.Pending
	after  []func()
	// handed are batches handed off (Store.Handoff) into this frame's SQL transaction (a
	// single-writer database, see handoffInSQLTx): written again elsewhere if the frame is
	// rolled back, for they were never the transaction's own.
	handed []core.OutgoingBatch
	open   bool
	name   string // a savepoint made with SQL text (see rawsavepoint.go); "" for the others
}

// txState is one RunInTx transaction: its open frames, the root first.
type txState struct {
	s *Store

	mu         sync.Mutex
	frames     []*frame
	rolledBack bool // fn called Rollback on the transaction itself
	// orphans are handed-off batches that could not be written again into the transaction
	// (see sqlScope.rewriteHanded): inserted on their own once it ends, committed or not.
	orphans []core.OutgoingBatch
}

func newTxState(s *Store) *txState {
	return &txState{s: s, frames: []*frame{{open: true}}}
}

// push opens a frame for a new savepoint on top of the stack.
func (st *txState) push(name string) *frame {
	st.mu.Lock()
	defer st.mu.Unlock()
	fr := &frame{open: true, name: name}
	st.frames = append(st.frames, fr)
	return fr
}

// top returns the innermost open frame, if fr (the frame of the caller's context) is still
// open. Call with st.mu held.
func (st *txState) top(fr *frame) (*frame, bool) {
	if !fr.open || len(st.frames) == 0 {
		return nil, false
	}
	return st.frames[len(st.frames)-1], true
}

// pop closes fr and every frame above it and returns them, fr first; nil when fr is no
// longer open (its savepoint already ended, or an outer one did). Call with st.mu held.
func (st *txState) pop(fr *frame) []*frame {
	for i := len(st.frames) - 1; i >= 0; i-- {
		if st.frames[i] == fr {
			out := st.frames[i:]
			st.frames = st.frames[:i:i]
			for _, f := range out {
				f.open = false
			}
			return out
		}
	}
	return nil
}

// release merges fr and the frames above it into the frame below fr.
func (st *txState) release(fr *frame) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.releaseLocked(fr)
}

func (st *txState) releaseLocked(fr *frame) {
	popped := st.pop(fr)
	if len(popped) == 0 || len(st.frames) == 0 {
		return
	}
	into := st.frames[len(st.frames)-1]
	for _, f := range popped {
		into.staged = append(into.staged, f.staged...)
		into.after = append(into.after, f.after...)
		into.handed = append(into.handed, f.handed...)
	}
}

// discard drops fr and the frames above it with their work. Discarding the root frame
// records that fn rolled the transaction back.
func (st *txState) discard(fr *frame) {
	st.discardHanded(fr)
}

// discardHanded is discard, returning the batches handed off into the discarded frames.
func (st *txState) discardHanded(fr *frame) (handed []core.OutgoingBatch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	popped := st.pop(fr)
	if len(popped) > 0 && len(st.frames) == 0 {
		st.rolledBack = true
	}
	for _, f := range popped {
		handed = append(handed, f.handed...)
	}
	return handed
}

// allHanded returns the batches handed off into every open frame.
func (st *txState) allHanded() (handed []core.OutgoingBatch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range st.frames {
		handed = append(handed, f.handed...)
	}
	return handed
}

// end closes every frame and returns the work of the transaction, as COMMIT would keep it:
// open savepoints count as released. rolledBack reports that fn had rolled it back itself.
func (st *txState) end() (staged []*core.Pending, after []func(), rolledBack bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range st.frames {
		staged = append(staged, f.staged...)
		after = append(after, f.after...)
		f.open = false
	}
	st.frames = nil
	return staged, after, st.rolledBack
}

// errCommitInRunInTx refuses Commit on the transaction RunInTx hands out.
var errCommitInRunInTx = errors.New("txmq outbox: Commit on the transaction given by RunInTx is refused: RunInTx writes the staged outbox rows and commits when fn returns; return nil from fn to commit, or an error to roll back")

// scopedTx is the pgx.Tx that RunInTx, Store.Savepoint and their Begin hand out: the
// transaction or a savepoint of it, with its frame. Begin, Commit and Rollback keep the frames
// in step with the database; every other method is the wrapped pgx.Tx's, so it goes wherever
// a pgx.Tx does. It is also the core.Tx that the contexts of RunInTx and Savepoint carry.
type scopedTx struct {
	pgx.Tx
	st   *txState
	fr   *frame
	root bool // the transaction itself, not a savepoint
}

// Begin starts a savepoint (pgx's pseudo nested transaction) with its own frame.
func (t *scopedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sp, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &scopedTx{Tx: sp, st: t.st, fr: t.st.push("")}, nil
}

// Commit releases the savepoint: its messages and callbacks join the enclosing level. If the
// release fails they are discarded. On the transaction itself it is refused: RunInTx commits.
func (t *scopedTx) Commit(ctx context.Context) error {
	if t.root {
		return errCommitInRunInTx
	}
	if err := t.Tx.Commit(ctx); err != nil {
		t.st.discard(t.fr)
		return err
	}
	t.st.release(t.fr)
	return nil
}

// Rollback rolls the savepoint back with the messages and callbacks staged inside it. On the
// transaction itself it rolls everything back, and RunInTx then returns an error.
func (t *scopedTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.st.discard(t.fr)
	return err
}

// Stage keeps p for the before-commit insert, in the innermost open savepoint. It implements
// core.Tx.
func (t *scopedTx) Stage(_ context.Context, p *core.Pending) error {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	top, ok := t.st.top(t.fr)
	if !ok {
		return fmt.Errorf("txmq outbox: queue %q: the transaction or savepoint of this context has already ended; publish inside the function given to RunInTx/Savepoint, with its context", p.Queue)
	}
	top.staged = append(top.staged, p)
	return nil
}

// AfterCommit registers fn to run after the transaction commits, unless the innermost open
// savepoint is rolled back. It implements core.Tx. It returns false once the transaction or
// savepoint of the context has ended.
func (t *scopedTx) AfterCommit(fn func()) bool {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	top, ok := t.st.top(t.fr)
	if !ok {
		return false
	}
	top.after = append(top.after, fn)
	return true
}

// context returns ctx carrying t for publishes (core.Tx) and for Savepoint and nested RunInTx.
func (t *scopedTx) context(ctx context.Context) context.Context {
	return context.WithValue(core.ContextWithTx(ctx, t), scopeKey{t.st.s}, t)
}
