// Package groupcommit runs concurrent requests of one kind (acks, lease extensions, publishes) as one
// statement, the way a database group-commits. It is shared by the SQL adapters, whose settle
// statements take many rows at once; it knows nothing of SQL.
//
// The first request of a round becomes its leader. When no statement of the group is running,
// the leader runs its round at once (a lone request pays no wait); otherwise it gathers
// requests for up to the window or until the batch size is pending, then runs them together.
// An eager group (NewEager) also ends the gathering as soon as no statement of the group runs
// any more, so a request waits at most for the statement it found running.
// The statement runs detached from the callers' cancellation, since it settles other callers'
// requests too; a caller whose ctx ends first returns ctx's error, and the statement's effect
// on its request is still recorded wherever run records it. A round that must not outlive any
// of its callers (publishes: nothing stored behind a caller told it failed) runs its
// statement through RunCancellable.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Group gathers requests of type R into rounds. The zero value is not usable: call New.
type Group[R any] struct {
	window time.Duration
	batch  int
	run    func(ctx context.Context, reqs []R) error

	eager bool // a leader stops gathering when no round runs (NewEager)

	mu      sync.Mutex
	cur     *round[R]     // gathering, nil when none
	running int           // rounds of this group in flight
	idle    chan struct{} // closed when running drops to 0; nil while none runs
}

// round is one statement's worth of requests.
type round[R any] struct {
	reqs []R
	full chan struct{} // closed when batch requests joined
	done chan struct{} // closed when err is set
	err  error
}

// New returns a Group running each round with run (which records every request's outcome in
// the request itself and returns the round's error). window is how long a leader gathers
// while another round runs (negative: every request runs alone); batch is the most requests
// one round takes (1 or less: every request runs alone).
func New[R any](window time.Duration, batch int, run func(ctx context.Context, reqs []R) error) *Group[R] {
	return &Group[R]{window: window, batch: batch, run: run}
}

// NewEager is New for a group whose requests come from a few concurrent callers (a handful of
// writers each waiting for its own request): a leader that found a round running gathers only
// until no round of the group runs any more (or the window passed, or the batch is pending),
// so that a request never waits longer than the statement it found running, and the callers
// released by that statement join the next round instead of meeting a window that waits for
// callers who are not coming.
func NewEager[R any](window time.Duration, batch int, run func(ctx context.Context, reqs []R) error) *Group[R] {
	return &Group[R]{window: window, batch: batch, run: run, eager: true}
}

// Do runs req in a round and returns the round's error, or ctx's error when ctx ended first
// (a ctx already ended runs nothing).
func (g *Group[R]) Do(ctx context.Context, req R) error {
	if err := ctx.Err(); err != nil {
		return err // the caller gave up already: settle nothing
	}
	if g.window < 0 || g.batch <= 1 {
		return g.run(context.WithoutCancel(ctx), []R{req})
	}
	g.mu.Lock()
	r, leader := g.cur, false
	if r == nil {
		r = &round[R]{full: make(chan struct{}), done: make(chan struct{})}
		g.cur, leader = r, true
	}
	r.reqs = append(r.reqs, req)
	if len(r.reqs) >= g.batch {
		g.cur = nil // no one else joins
		close(r.full)
	}
	busy, idle := g.running > 0, g.idle
	if !g.eager {
		idle = nil // never ready: only the window or a full batch ends the gathering
	}
	g.mu.Unlock()

	if !leader {
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if busy && g.window > 0 {
		t := time.NewTimer(g.window)
		select {
		case <-r.full:
		case <-t.C:
		case <-idle:
		}
		t.Stop()
	}
	g.mu.Lock()
	if g.cur == r {
		g.cur = nil
	}
	if g.eager && g.running == 0 {
		g.idle = make(chan struct{})
	}
	g.running++
	g.mu.Unlock()
	r.err = g.run(context.WithoutCancel(ctx), r.reqs)
	g.mu.Lock()
	if g.running--; g.running == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
	close(r.done)
	return r.err
}
