package core

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	q := func(name string, free int, excl bool) QueueSlots {
		return QueueSlots{Queue: name, Free: free, Exclusive: excl}
	}
	for _, tt := range []struct {
		name string
		in   FetchRequest
		want FetchRequest
	}{
		{"defaults", FetchRequest{Wait: -time.Second},
			FetchRequest{Lease: DefaultLease, Max: DefaultFetchMax}},
		{"unlimited becomes max", FetchRequest{Lease: time.Second, Max: 7, Queues: []QueueSlots{q("a", Unlimited, false), q("b", 3, false)}},
			FetchRequest{Lease: time.Second, Max: 7, Queues: []QueueSlots{q("a", 7, false), q("b", 3, false)}}},
		{"free above max is cut", FetchRequest{Max: 4, Queues: []QueueSlots{q("a", 9, false)}},
			FetchRequest{Lease: DefaultLease, Max: 4, Queues: []QueueSlots{q("a", 4, false)}}},
		{"exclusive asks for one", FetchRequest{Max: 4, Queues: []QueueSlots{q("a", Unlimited, true), q("b", 3, true)}},
			FetchRequest{Lease: DefaultLease, Max: 4, Queues: []QueueSlots{q("a", 1, true), q("b", 1, true)}}},
		{"full queues left out", FetchRequest{Max: 4, Queues: []QueueSlots{q("a", 0, false), q("b", -3, false), q("c", 0, true), q("d", 2, false)}},
			FetchRequest{Lease: DefaultLease, Max: 4, Queues: []QueueSlots{q("d", 2, false)}}},
		{"free cut to the cluster limit", FetchRequest{Max: 8, Queues: []QueueSlots{{Queue: "a", Free: Unlimited, Limit: 3}, {Queue: "b", Free: 2, Limit: 3, KeyLimit: 1}}},
			FetchRequest{Lease: DefaultLease, Max: 8, Queues: []QueueSlots{{Queue: "a", Free: 3, Limit: 3}, {Queue: "b", Free: 2, Limit: 3, KeyLimit: 1}}}},
	} {
		got := tt.in.Normalize()
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: Normalize(%+v) = %+v, want %+v", tt.name, tt.in, got, tt.want)
		}
		if again := got.Normalize(); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Errorf("%s: Normalize is not idempotent: %+v then %+v", tt.name, got, again)
		}
	}
}

func TestNormalizeKeepsANormalRequest(t *testing.T) {
	req := FetchRequest{Node: "n", Lease: time.Second, Max: 5, Queues: []QueueSlots{{Queue: "a", Free: 5}, {Queue: "b", Free: 1, Exclusive: true}}}
	got := req.Normalize()
	if &got.Queues[0] != &req.Queues[0] {
		t.Fatal("a normal request's queues were copied")
	}
	if n := testing.AllocsPerRun(100, func() { _ = req.Normalize() }); n != 0 {
		t.Fatalf("Normalize of a normal request allocates %v times", n)
	}
}

func TestShares(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		max   int
		free  []int
		start int
		want  []int
	}{
		{10, nil, 0, []int{}},
		{10, []int{10}, 0, []int{10}},
		{10, []int{10, 10}, 0, []int{5, 5}},
		{10, []int{10, 10, 10}, 0, []int{4, 3, 3}},
		{10, []int{10, 10, 10}, 2, []int{3, 3, 4}},
		{10, []int{2, 10, 10}, 0, []int{2, 4, 4}},
		{10, []int{1, 1, 10}, 1, []int{1, 1, 8}},
		{10, []int{1, 2, 3}, 0, []int{1, 2, 3}},
		{2, []int{5, 5, 5, 5}, 0, []int{1, 1, 0, 0}},
		{2, []int{5, 5, 5, 5}, 3, []int{1, 0, 0, 1}},
		{2, []int{1, 5, 5}, 7, []int{0, 1, 1}},
		{100, []int{1, 100, 100}, 0, []int{1, 50, 49}},
	} {
		req := FetchRequest{Max: tt.max}
		for i, f := range tt.free {
			req.Queues = append(req.Queues, QueueSlots{Queue: fmt.Sprint("q", i), Free: f})
		}
		got := req.Shares(tt.start)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Max %d, Free %v, start %d: Shares = %v, want %v", tt.max, tt.free, tt.start, got, tt.want)
		}
		sum := 0
		for i, s := range got {
			sum += s
			if s < 0 || s > tt.free[i] {
				t.Errorf("Max %d, Free %v: share %d is %d", tt.max, tt.free, i, s)
			}
		}
		if sum > tt.max {
			t.Errorf("Max %d, Free %v: shares %v add up to %d", tt.max, tt.free, got, sum)
		}
	}
}

func TestLeaseOr(t *testing.T) {
	t.Parallel()
	if LeaseOr(0) != DefaultLease || LeaseOr(-1) != DefaultLease || LeaseOr(time.Second) != time.Second {
		t.Fatal("LeaseOr does not default a non-positive lease")
	}
}

// errLimiter is a backend whose LimitsClaims returns err.
type errLimiter struct {
	Backend
	err error
}

func (b errLimiter) LimitsClaims() error { return b.err }

// wrapped is a backend wrapper with Unwrap.
type wrapped struct{ Backend }

func (w wrapped) Unwrap() Backend { return w.Backend }

func TestLimitsClaims(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		b    Backend
		ok   bool
	}{
		{"limiter", errLimiter{}, true},
		{"limiter refusing", errLimiter{err: fmt.Errorf("server too old")}, false},
		{"wrapped limiter", wrapped{errLimiter{}}, true},
		{"no capability", wrapped{}, false},
	} {
		err := LimitsClaims(tt.b)
		if (err == nil) != tt.ok {
			t.Errorf("%s: LimitsClaims = %v; want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: LimitsClaims = %v; want it to wrap ErrInvalidConfig", tt.name, err)
		}
	}
}
