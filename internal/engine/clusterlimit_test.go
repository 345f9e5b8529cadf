package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// limitingBackend is a fake backend that enforces cluster-wide limits and shares fairly.
type limitingBackend struct{ *fakeBackend }

func (limitingBackend) LimitsClaims() error { return nil }
func (limitingBackend) SharesFairly() error { return nil }

// fairBackend is a fake backend that shares fairly but enforces no cluster-wide limits.
type fairBackend struct{ *fakeBackend }

func (fairBackend) SharesFairly() error { return nil }

// TestLimitsRefusedWithoutTheCapability: on a backend without core.ClusterLimiter, Listen
// and Publish refuse a queue with a ClusterLimit or a KeyLimit, naming the queue and the
// setting.
func TestLimitsRefusedWithoutTheCapability(t *testing.T) {
	t.Parallel()
	n := newTestNodeOn(t, fairBackend{&fakeBackend{}}, nil)
	for _, c := range []struct {
		name, setting string
		cfg           txmq.QueueConfig[int]
	}{
		{"lim-global", "ClusterLimit 3", txmq.QueueConfig[int]{Transactional: txmq.Try, ClusterLimit: 3}},
		{"lim-key", "KeyLimit 2", txmq.QueueConfig[int]{Transactional: txmq.Try, Fair: true, KeyLimit: 2}},
	} {
		q := txmq.MustDeclareIn(n.Registry(), c.name, c.cfg)
		for call, err := range map[string]error{
			"Listen":  q.Listen(n, func(context.Context, []int) error { return nil }),
			"Publish": q.Publish(context.Background(), n, 1),
		} {
			if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.setting) {
				t.Errorf("%s on %s: %v; want ErrInvalidConfig naming the queue and %q", call, c.name, err, c.setting)
			}
		}
	}
}

// TestClusterLimitFreeSlots: a node asks for at most the ClusterLimit minus what it runs,
// whatever its own cap, and sends both limits to the backend.
func TestClusterLimitFreeSlots(t *testing.T) {
	t.Parallel()
	n := newTestNodeOn(t, limitingBackend{&fakeBackend{}}, &txmq.NodeOptions{FetchMax: 50})
	capped := txmq.MustDeclareIn(n.Registry(), "capped", txmq.QueueConfig[int]{Transactional: txmq.Try, ClusterLimit: 3, MaxConcurrentBatches: txmq.Cap(5)})
	tight := txmq.MustDeclareIn(n.Registry(), "tight", txmq.QueueConfig[int]{Transactional: txmq.Try, ClusterLimit: 10, MaxConcurrentBatches: txmq.Cap(2)})
	keyed := txmq.MustDeclareIn(n.Registry(), "keyed", txmq.QueueConfig[int]{Transactional: txmq.Try, Fair: true, KeyLimit: 2})
	for _, q := range []*txmq.Queue[int]{capped, tight, keyed} {
		if err := q.Listen(n, func(context.Context, []int) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	free := func() map[string]core.QueueSlots {
		out := map[string]core.QueueSlots{}
		for _, s := range engine.Of(n).FetchRequest(time.Now()).Queues {
			out[s.Queue] = s
		}
		return out
	}
	got := free()
	if s := got["capped"]; s.Free != 3 || s.Limit != 3 {
		t.Errorf("capped: %+v; want Free 3 and Limit 3 (the limit below the node's cap)", s)
	}
	if s := got["tight"]; s.Free != 2 || s.Limit != 10 {
		t.Errorf("tight: %+v; want Free 2 (the node's cap) and Limit 10", s)
	}
	if s := got["keyed"]; s.Free != 50 || s.KeyLimit != 2 || s.Limit != 0 || !s.Fair {
		t.Errorf("keyed: %+v; want Free 50, KeyLimit 2, no Limit, Fair", s)
	}
	engine.Of(n).SetInflight("capped", 2)
	if s := free()["capped"]; s.Free != 1 {
		t.Errorf("capped with 2 running here: %+v; want Free 1", s)
	}
	engine.Of(n).SetInflight("capped", 3)
	if s, ok := free()["capped"]; ok {
		t.Errorf("capped with 3 running here: %+v; want it left out (the cluster may run 3)", s)
	}
	engine.Of(n).SetInflight("capped", 0)
	for _, s := range engine.Of(n).Slots() {
		if s.Queue == "capped" && (s.Cap != 3 || s.Limit != 3) {
			t.Errorf("Slots reports %+v for capped; want cap 3 (the limit below the node's cap) and limit 3", s)
		}
		if s.Queue == "keyed" && (s.KeyLimit != 2 || s.Limit != 0) {
			t.Errorf("Slots reports %+v for keyed; want key limit 2 and no limit", s)
		}
	}
}
