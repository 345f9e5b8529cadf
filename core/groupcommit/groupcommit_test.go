package groupcommit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// req is a test request: run records the round it ran in.
type req struct {
	id    int
	round int
}

// TestLoneRequestRunsAtOnce: with nothing running, a request runs alone without waiting for
// the window.
func TestLoneRequestRunsAtOnce(t *testing.T) {
	t.Parallel()
	var rounds [][]*req
	g := New(time.Hour, 100, func(_ context.Context, rs []*req) error {
		rounds = append(rounds, rs)
		return nil
	})
	if err := g.Do(context.Background(), &req{id: 1}); err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 1 || len(rounds[0]) != 1 {
		t.Fatalf("rounds = %v; want one round of one", rounds)
	}
}

// TestConcurrentRequestsShareARound: requests arriving while a round runs gather into the
// next round (up to the batch size), and each learns the round's error.
func TestConcurrentRequestsShareARound(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var sizes []int
	boom := errors.New("boom")
	g := New(time.Hour, 3, func(_ context.Context, rs []*req) error {
		mu.Lock()
		sizes = append(sizes, len(rs))
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			started <- struct{}{}
			<-release // the first round holds the group busy
			return nil
		}
		return boom
	})
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(context.Background(), &req{id: 0}) })
	<-started
	errs := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		wg.Go(func() { errs <- g.Do(context.Background(), &req{id: i}) })
	}
	// The three gather while the first round runs; the third fills the batch and runs them.
	for range 3 {
		if err := <-errs; !errors.Is(err, boom) {
			t.Errorf("Do = %v; want the round's error", err)
		}
	}
	close(release)
	wg.Wait()
	if len(sizes) != 2 || sizes[1] != 3 {
		t.Fatalf("round sizes = %v; want [1 3]", sizes)
	}
}

// TestEndedContextRunsNothing: a request whose context already ended is not run; one whose
// context ends while it waits in a round returns the context's error.
func TestEndedContextRunsNothing(t *testing.T) {
	t.Parallel()
	ran := false
	g := New(time.Millisecond, 10, func(context.Context, []*req) error { ran = true; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, &req{}); !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Do with an ended ctx = %v, ran %v", err, ran)
	}
}

// TestUngrouped: a negative window or a batch of 1 runs every request alone.
func TestUngrouped(t *testing.T) {
	t.Parallel()
	for _, g := range []*Group[*req]{
		New(-1, 10, func(_ context.Context, rs []*req) error { rs[0].round = len(rs); return nil }),
		New(time.Second, 1, func(_ context.Context, rs []*req) error { rs[0].round = len(rs); return nil }),
	} {
		r := &req{}
		if err := g.Do(context.Background(), r); err != nil || r.round != 1 {
			t.Fatalf("Do = %v, round of %d", err, r.round)
		}
	}
}

// TestEagerLeaderGoesWhenIdle: in an eager group, a leader that found a round running runs
// its own as soon as that round ends, without waiting out the window; a plain group's leader
// waits for the window (or a full batch) instead.
func TestEagerLeaderGoesWhenIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var sizes []int
	g := NewEager(time.Hour, 100, func(_ context.Context, rs []*req) error {
		mu.Lock()
		sizes = append(sizes, len(rs))
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- g.Do(context.Background(), &req{id: 0}) }()
	<-started
	second := make(chan error, 1)
	go func() { second <- g.Do(context.Background(), &req{id: 1}) }()
	// Wait until the second request gathers in its round behind the running one.
	for {
		g.mu.Lock()
		gathering := g.cur != nil
		g.mu.Unlock()
		if gathering {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil { // an hour's window: only the idle group ends the wait
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[1] != 1 {
		t.Fatalf("round sizes = %v; want [1 1]", sizes)
	}
}

// caller is a request of TestRunCancellable.
type caller struct {
	ctx context.Context
	err error
}

func (c *caller) CallerContext() context.Context { return c.ctx }
func (c *caller) SetErr(err error)               { c.err = err }

// TestRunCancellable: a member whose caller already gave up is left out with its caller's
// error; a caller giving up during the statement cancels it, and its reason is the round's.
func TestRunCancellable(t *testing.T) {
	t.Parallel()
	gone, cancelGone := context.WithCancel(context.Background())
	cancelGone()
	live, stop := context.WithCancelCause(context.Background())
	reqs := []*caller{{ctx: gone}, {ctx: live}, {ctx: context.Background()}}
	var ran int
	reason := errors.New("the caller's deadline")
	err := RunCancellable(context.Background(), reqs, func(ctx context.Context, rs []*caller) error {
		ran = len(rs)
		stop(reason)
		<-ctx.Done()
		return ctx.Err()
	})
	if ran != 2 {
		t.Fatalf("the statement ran %d members; want 2 (the one whose caller gave up before is left out)", ran)
	}
	if !errors.Is(reqs[0].err, context.Canceled) {
		t.Fatalf("left-out member's error = %v; want its caller's context.Canceled", reqs[0].err)
	}
	if !errors.Is(err, reason) || !errors.Is(err, context.Canceled) {
		t.Fatalf("round error = %v; want the statement's error carrying the caller's reason", err)
	}
	if err := RunCancellable(context.Background(), []*caller{{ctx: gone}}, func(context.Context, []*caller) error {
		t.Fatal("a round of members that all gave up ran its statement")
		return nil
	}); err != nil {
		t.Fatalf("round of members that all gave up = %v; want nil (each told through SetErr)", err)
	}
}
