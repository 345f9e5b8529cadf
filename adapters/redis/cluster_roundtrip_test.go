package redis

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// roundTrips counts, per server address, the round trips a client makes: one per command sent
// alone, one per pipeline (on a cluster client, one per node a pipeline reaches).
type roundTrips struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *roundTrips) add(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[addr]++
}

// take returns the counts so far and starts over.
func (r *roundTrips) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

// hook returns a go-redis hook counting the round trips of the client of addr.
func (r *roundTrips) hook(addr string) goredis.Hook { return &roundTripHook{r: r, addr: addr} }

type roundTripHook struct {
	r    *roundTrips
	addr string
}

func (h *roundTripHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *roundTripHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.r.add(h.addr)
		return next(ctx, cmd)
	}
}

func (h *roundTripHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.r.add(h.addr)
		return next(ctx, cmds)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestClusterClaimRoundTrips: a Fetch over queues spread across the cluster's masters claims
// them with one pipelined round trip per master that holds one of them (sent to the masters in
// parallel by go-redis), never one per queue; on one server the same Fetch is one round trip.
// The figures are logged for docs/adapters.md (Redis Cluster).
func TestClusterClaimRoundTrips(t *testing.T) {
	t.Parallel()
	const queues = 12
	u := clusterURL(t)
	var crt roundTrips
	cbe := openClusterURL(t, u, map[string][]string{"txmq_prefix": {clusterTestPrefix(t, u)}}, func(_ *Options, co *goredis.ClusterOptions) {
		co.NewClient = func(opt *goredis.Options) *goredis.Client {
			c := goredis.NewClient(opt)
			c.AddHook(crt.hook(opt.Addr))
			return c
		}
	})
	var srt roundTrips
	sbe := newTestBackend(t, "", func(o *Options) {
		c := goredis.NewClient(testRedisOptions(t))
		t.Cleanup(func() { _ = c.Close() })
		c.AddHook(srt.hook(o.Addr))
		o.Client = c
	})

	slots := make([]core.QueueSlots, queues)
	names := make([]string, queues)
	for i := range slots {
		names[i] = fmt.Sprintf("rt%02d", i)
		slots[i] = all(names[i])
	}
	// The masters holding the queues' slots.
	ctx := context.Background()
	cc := cbe.Client().(*goredis.ClusterClient)
	masters := map[string]bool{}
	for _, q := range names {
		m, err := cc.MasterForKey(ctx, cbe.keys.keys(q).script[0])
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the %d queues all hash to one master (%v); pick names that spread", queues, masters)
	}

	for _, tc := range []struct {
		name    string
		be      *Backend
		rt      *roundTrips
		targets map[string]bool // the servers the claim must reach, once each
	}{
		{"cluster", cbe, &crt, masters},
		{"single", sbe, &srt, map[string]bool{testAddr(t): true}},
	} {
		// Warm up: script cache, cluster slots and command info.
		for _, q := range names {
			publish(t, tc.be, q, q+"-warm", time.Time{})
		}
		if cs := fetch(t, tc.be, slots...); len(cs) != queues {
			t.Fatalf("%s: warm-up fetch claimed %d of %d", tc.name, len(cs), queues)
		}
		for _, q := range names {
			publish(t, tc.be, q, q+"-1", time.Time{})
		}
		tc.rt.take()
		cs := fetch(t, tc.be, slots...)
		got := tc.rt.take()
		if len(cs) != queues {
			t.Fatalf("%s: fetch claimed %d of %d", tc.name, len(cs), queues)
		}
		for addr, n := range got {
			if !tc.targets[addr] || n != 1 {
				t.Errorf("%s: the claim of %d queues made %d round trip(s) to %s; want one to each of %v", tc.name, queues, n, addr, keysOf(tc.targets))
			}
		}
		if len(got) != len(tc.targets) {
			t.Errorf("%s: the claim reached %v; want %v", tc.name, keysOf(got), keysOf(tc.targets))
		}
		t.Logf("%s: one Fetch of %d queues: %d claim round trip(s) (%v)", tc.name, queues, sum(got), got)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestClusterKeysShareSlot: every key a queue's scripts touch, and its wake channel, hash to
// the slot of the queue's hash tag on the cluster (asked of the server with CLUSTER KEYSLOT),
// for queue names of every shape the name rule allows.
func TestClusterKeysShareSlot(t *testing.T) {
	t.Parallel()
	u := clusterURL(t)
	be := openClusterURL(t, u, nil, nil)
	ctx := context.Background()
	cc := be.Client().(*goredis.ClusterClient)
	for _, q := range []string{"a", "emails", "q-1_x", strings.Repeat("z", 64), "p0123456789abcdef-42"} {
		k := be.keys.keys(q)
		want, err := cc.ClusterKeySlot(ctx, "{"+be.Prefix()+":"+q+"}").Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		for _, key := range append(append([]string{}, k.script...), k.wake) {
			got, err := cc.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
			}
			if got != want {
				t.Errorf("queue %q: key %s is in slot %d, the queue's tag in %d", q, key, got, want)
			}
		}
	}
}

// TestClusterIdlePickup: a node waiting on queues spread over the masters picks up a publish to
// each of them at once: the publish's wake-up (PUBLISH inside the script, on the queue's
// master) reaches the node's one subscription, held on whichever node go-redis chose, because
// Redis Cluster broadcasts PUBLISH to every node.
func TestClusterIdlePickup(t *testing.T) {
	t.Parallel()
	u := clusterURL(t)
	prefix := clusterTestPrefix(t, u)
	be := openClusterURL(t, u, map[string][]string{"txmq_prefix": {prefix}}, nil)
	other := openClusterURL(t, u, map[string][]string{"txmq_prefix": {prefix}}, nil)
	names := []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	slots := make([]core.QueueSlots, len(names))
	for i, q := range names {
		slots[i] = all(q)
	}
	req := core.FetchRequest{Node: "n", Queues: slots, Lease: time.Second, Wait: 100 * time.Millisecond}
	for range 2 { // subscribe and look once
		if cs, err := be.Fetch(context.Background(), req); err != nil || len(cs) != 0 {
			t.Fatalf("warm-up fetch: %d claims, %v", len(cs), err)
		}
	}
	for _, q := range names {
		cs := testenv.IdlePickup(t, be, req, q, 2*time.Second, func() { publish(t, other, q, q+"-b", time.Time{}) })
		must(t, be.Ack(context.Background(), cs[0]))
	}
}
