package parity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("transactions",
		property{name: "hung_backend_after_commit_keeps_deadline", run: txHungBackend},
	)
}

// frozen is the adapter's client behind a backend process that stopped answering (SIGSTOP):
// each Publish blocks, whatever its context, until thaw, and then fails as a connection
// reset would. Every other call goes to the adapter.
type frozen struct {
	core.Backend
	gate chan struct{}
	once *sync.Once
}

func (f frozen) Publish(ctx context.Context, b core.OutgoingBatch) error {
	select {
	case <-f.gate:
		return f.Backend.Publish(ctx, b)
	default:
	}
	<-f.gate
	return fmt.Errorf("parity: the frozen backend dropped the connection: %w", core.ErrBackendUnavailable)
}

func (f frozen) thaw() { f.once.Do(func() { close(f.gate) }) }

// txHungBackend: with the backend frozen after commit, RunInTx returns within its caller's
// deadline (the commit is what it waits for, not the publish), and once the backend answers
// again every committed message is delivered, once, by the after-commit publishers or the
// recovery sweep.
func txHungBackend(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	listen(x, rec, q, n, nil)
	f := frozen{Backend: x.rawClient(), gate: make(chan struct{}), once: &sync.Once{}}
	x.T.Cleanup(f.thaw)
	s := x.store(f, outbox.Options{PublishTimeout: 20 * time.Second, RecoveryAge: 200 * time.Millisecond, SweepInterval: 100 * time.Millisecond})
	const calls, deadline = 6, 3 * time.Second // room for the app database on a loaded machine; a call waiting for the backend takes PublishTimeout (20 s)
	var (
		mu   sync.Mutex
		keys []string
		wg   sync.WaitGroup
	)
	for i := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			var mine []string
			err := runInTx(ctx, s, func(ctx context.Context) error {
				mine = publishKeysCtx(ctx, x, q, n, fmt.Sprintf("hung-%d", i), 3, 3)
				return nil
			})
			took := time.Since(start)
			if err != nil {
				x.T.Errorf("RunInTx %d with a frozen backend: %v", i, err)
				return
			}
			// Generous for a loaded machine: a call that waits for the backend takes the
			// whole PublishTimeout (20 s).
			if took > deadline+3*time.Second {
				x.T.Errorf("RunInTx %d took %v with a frozen backend; want it back within its %v deadline", i, took, deadline)
			}
			mu.Lock()
			keys = append(keys, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if x.T.Failed() {
		return
	}
	if r := outboxRows(x, s); r != calls {
		x.T.Fatalf("%d outbox rows while the backend is frozen, want %d (one per committed transaction)", r, calls)
	}
	f.thaw()
	if err := s.Start(x.ctx()); err != nil { // the relay and the recovery sweep
		x.T.Fatalf("Start: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after the backend came back")
}

// waitStoreIdle waits for the after-commit publishing of the RunInTx calls made on s so far
// (Store.WaitIdle): RunInTx returns before its rows are published and deleted.
func waitStoreIdle(x *X, s *outbox.Store) {
	x.T.Helper()
	if err := s.WaitIdle(x.ctx()); err != nil {
		x.T.Fatalf("WaitIdle: %v", err)
	}
}
