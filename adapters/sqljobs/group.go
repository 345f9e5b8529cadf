package sqljobs

import (
	"context"
	"sync"
	"time"
)

// group runs concurrent requests of one kind (Ack/Drop deletes, or lease extensions) as one
// statement, the way a database group-commits: the first request of a round becomes its
// leader. When no statement of the group is running, the leader runs its round at once (a
// lone settle pays no wait); otherwise it gathers requests for up to Options.SettleWindow or
// until Options.SettleBatch are pending, then runs them together. Every request learns its own
// row's outcome from the statement's RETURNING rows.
//
// The statement runs detached from the callers' cancellation (bounded by QueryTimeout), since
// it settles other callers' claims too; a caller whose ctx ends first returns ctx's error, and
// the statement's effect on its claim is still recorded in the claim's handle.
type group struct {
	be   *Backend
	exec func(ctx context.Context, reqs []*groupReq) error // sets each req's ok (and until)

	mu      sync.Mutex
	cur     *round // gathering, nil when none
	running int    // statements of this group in flight
}

// round is one statement's worth of requests.
type round struct {
	reqs []*groupReq
	full chan struct{} // closed when SettleBatch requests joined
	done chan struct{} // closed when ok/until and err are set
	err  error
}

// groupReq is one claim's request in a round.
type groupReq struct {
	h     *handle
	lease int64 // µs, extensions only

	ok    bool      // the row matched the id, token and a live lease
	until time.Time // the new lease end, extensions only
}

func newGroup(be *Backend, exec func(context.Context, []*groupReq) error) *group {
	return &group{be: be, exec: exec}
}

// do runs req in a round and reports the round's error, unclassified, or ctx's error when
// ctx ended first; req.ok (and req.until) are set when it is nil.
func (g *group) do(ctx context.Context, req *groupReq) error {
	if err := ctx.Err(); err != nil {
		return err // the caller gave up already: settle nothing
	}
	o := &g.be.o
	if o.SettleWindow < 0 || o.SettleBatch <= 1 {
		r := &round{reqs: []*groupReq{req}}
		return g.runRound(ctx, r)
	}
	g.mu.Lock()
	r, leader := g.cur, false
	if r == nil {
		r = &round{full: make(chan struct{}), done: make(chan struct{})}
		g.cur, leader = r, true
	}
	r.reqs = append(r.reqs, req)
	if len(r.reqs) >= o.SettleBatch {
		g.cur = nil // no one else joins
		close(r.full)
	}
	busy := g.running > 0
	g.mu.Unlock()

	if !leader {
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if busy && o.SettleWindow > 0 {
		t := time.NewTimer(o.SettleWindow)
		select {
		case <-r.full:
		case <-t.C:
		}
		t.Stop()
	}
	g.mu.Lock()
	if g.cur == r {
		g.cur = nil
	}
	g.running++
	g.mu.Unlock()
	r.err = g.runRound(ctx, r)
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	close(r.done)
	return r.err
}

// runRound runs the round's statement, once more when the first failure is retryable, and
// returns its error unclassified (each caller names its own claim in it).
func (g *group) runRound(ctx context.Context, r *round) error {
	return g.be.attempt(context.WithoutCancel(ctx), func(ctx context.Context) error {
		for _, q := range r.reqs {
			q.ok = false
		}
		return g.exec(ctx, r.reqs)
	})
}
