package core

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// attempts counts claim calls and claims from the nth one on.
type attempts struct {
	n, claimFrom int32
	next         time.Duration
}

func (a *attempts) claim() ([]*Claim, time.Duration, error) {
	n := atomic.AddInt32(&a.n, 1)
	if a.claimFrom > 0 && n >= a.claimFrom {
		return []*Claim{{ID: "c"}}, -1, nil
	}
	return []*Claim{}, a.next, nil
}

func TestClaimWait(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	closedErr := errors.New("closed")
	for _, tt := range []struct {
		name      string
		opts      func(wake, done chan struct{}) WaitOptions
		a         attempts
		act       func(wake, done chan struct{}, cancel context.CancelFunc)
		claims    int
		err       error
		calls     int32
		atLeast   time.Duration
		atMost    time.Duration
		cancelled bool // ctx done before the call
	}{
		{name: "no wait claims once", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{} }, calls: 1, atMost: 50 * time.Millisecond},
		{name: "claims at once", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 5 * time.Second} },
			a: attempts{claimFrom: 1}, claims: 1, calls: 1, atMost: 50 * time.Millisecond},
		{name: "wake-up claims again", opts: func(w, _ chan struct{}) WaitOptions {
			return WaitOptions{Wait: 5 * time.Second, Wake: func() <-chan struct{} { return w }}
		}, a: attempts{claimFrom: 2, next: -1}, act: func(w, _ chan struct{}, _ context.CancelFunc) {
			time.Sleep(50 * time.Millisecond)
			w <- struct{}{}
		}, claims: 1, calls: 2, atLeast: 50 * time.Millisecond, atMost: 2 * time.Second},
		{name: "next due time claims again", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 5 * time.Second} },
			a: attempts{claimFrom: 2, next: 100 * time.Millisecond}, claims: 1, calls: 2, atLeast: 100 * time.Millisecond, atMost: 2 * time.Second},
		{name: "deadline then a last look", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 100 * time.Millisecond} },
			a: attempts{next: -1}, calls: 2, atLeast: 100 * time.Millisecond, atMost: 2 * time.Second},
		{name: "deadline without a last look", opts: func(_, _ chan struct{}) WaitOptions {
			return WaitOptions{Wait: 100 * time.Millisecond, LastLook: func() bool { return false }}
		}, a: attempts{next: -1}, calls: 1, atLeast: 100 * time.Millisecond, atMost: 2 * time.Second},
		{name: "last look claims", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 100 * time.Millisecond} },
			a: attempts{claimFrom: 2, next: -1}, claims: 1, calls: 2, atLeast: 100 * time.Millisecond, atMost: 2 * time.Second},
		{name: "cancel ends the wait", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 5 * time.Second} },
			a: attempts{next: -1}, act: func(_, _ chan struct{}, cancel context.CancelFunc) {
				time.Sleep(50 * time.Millisecond)
				cancel()
			}, calls: 1, atLeast: 50 * time.Millisecond, atMost: 2 * time.Second},
		{name: "done ctx claims nothing", opts: func(_, _ chan struct{}) WaitOptions { return WaitOptions{Wait: 5 * time.Second} },
			a: attempts{claimFrom: 1}, cancelled: true, calls: 0, atMost: 50 * time.Millisecond},
		{name: "close returns Closed", opts: func(_, d chan struct{}) WaitOptions {
			return WaitOptions{Wait: 5 * time.Second, Done: d, Closed: func() error { return closedErr }}
		}, a: attempts{next: -1}, act: func(_, d chan struct{}, _ context.CancelFunc) {
			time.Sleep(50 * time.Millisecond)
			close(d)
		}, err: closedErr, calls: 1, atLeast: 50 * time.Millisecond, atMost: 2 * time.Second},
		{name: "close without Closed is empty", opts: func(_, d chan struct{}) WaitOptions { return WaitOptions{Wait: 5 * time.Second, Done: d} },
			a: attempts{next: -1}, act: func(_, d chan struct{}, _ context.CancelFunc) {
				time.Sleep(50 * time.Millisecond)
				close(d)
			}, calls: 1, atLeast: 50 * time.Millisecond, atMost: 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wake, done := make(chan struct{}, 1), make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelled {
				cancel()
			}
			if tt.act != nil {
				go tt.act(wake, done, cancel)
			}
			start := time.Now()
			cs, err := ClaimWait(ctx, tt.opts(wake, done), tt.a.claim)
			took := time.Since(start)
			if len(cs) != tt.claims || !errors.Is(err, tt.err) {
				t.Fatalf("got %d claims, %v; want %d, %v", len(cs), err, tt.claims, tt.err)
			}
			if err == nil && cs == nil {
				t.Fatal("got a nil slice without an error; want an empty one")
			}
			if n := atomic.LoadInt32(&tt.a.n); n != tt.calls {
				t.Fatalf("claim called %d times, want %d", n, tt.calls)
			}
			if took < tt.atLeast || took > tt.atMost {
				t.Fatalf("took %v, want between %v and %v", took, tt.atLeast, tt.atMost)
			}
		})
	}
	t.Run("error ends it", func(t *testing.T) {
		t.Parallel()
		_, err := ClaimWait(context.Background(), WaitOptions{Wait: 5 * time.Second}, func() ([]*Claim, time.Duration, error) { return nil, -1, errBoom })
		if !errors.Is(err, errBoom) {
			t.Fatalf("err = %v", err)
		}
	})
}
