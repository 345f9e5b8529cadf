package redis

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// countingHook counts the commands a client sends, pipelined or not.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// newCountingBackend opens a Backend whose client counts the commands it sends.
func newCountingBackend(t *testing.T, mod func(o *Options)) (*Backend, *countingHook) {
	t.Helper()
	rdb := goredis.NewClient(testRedisOptions(t))
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &countingHook{}
	rdb.AddHook(hook)
	o := &Options{Client: rdb, Prefix: uniquePrefix(t)}
	if mod != nil {
		mod(o)
	}
	be, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be, hook
}

// TestIdleFetchCostIsNotPerQueue: once a node has looked at its idle queues, its waiting
// fetches send no claim script per queue per poll: a wake-up (or the idle recheck, much
// later) is what makes a queue worth claiming again.
func TestIdleFetchCostIsNotPerQueue(t *testing.T) {
	t.Parallel()
	be, hook := newCountingBackend(t, nil)
	const queues, polls = 100, 8
	slots := make([]core.QueueSlots, queues)
	for i := range slots {
		slots[i] = all(fmt.Sprintf("idle%03d", i))
	}
	req := core.FetchRequest{Node: "n", Queues: slots, Lease: time.Second, Wait: 100 * time.Millisecond}
	ctx := context.Background()
	for range 2 { // subscribe and look once
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("warm-up fetch: %d claims, %v", len(cs), err)
		}
	}
	before := hook.n.Load()
	for range polls {
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("fetch: %d claims, %v", len(cs), err)
		}
	}
	sent := hook.n.Load() - before
	t.Logf("%d idle polls of %d queues sent %d commands", polls, queues, sent)
	if sent >= queues {
		t.Fatalf("%d idle polls of %d queues sent %d commands, want fewer than one per queue in all", polls, queues, sent)
	}
	// An idle queue still picks up a publish at once.
	other := newTestBackend(t, be.Prefix(), nil)
	testenv.IdlePickup(t, be, req, "idle042", time.Second, func() { publish(t, other, "idle042", "b1", time.Time{}) })
}

// TestIdleRecheckFindsUnannouncedBatch: a batch whose wake-up was lost (stored here without
// one) is still claimed by a fetch that skips its queue as idle, within Options.IdleRecheck.
func TestIdleRecheckFindsUnannouncedBatch(t *testing.T) {
	t.Parallel()
	const recheck = 300 * time.Millisecond
	be, hook := newCountingBackend(t, func(o *Options) { o.IdleRecheck = recheck })
	ctx := context.Background()
	req := core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second, Wait: 50 * time.Millisecond}
	for range 3 {
		if cs, err := be.Fetch(ctx, req); err != nil || len(cs) != 0 {
			t.Fatalf("warm-up fetch: %d claims, %v", len(cs), err)
		}
	}
	if n := hook.n.Load(); n == 0 {
		t.Fatal("no command counted")
	}
	// Store a batch the way the publish script does, minus its PUBLISH.
	k := be.keys.keys("q").script
	rdb := be.Client()
	must(t, rdb.HSet(ctx, k[1], "lost", "body").Err())
	must(t, rdb.HSet(ctx, k[3], "lost", 0).Err())
	must(t, rdb.ZAdd(ctx, k[0], goredis.Z{Score: 0, Member: "lost"}).Err())
	stored := time.Now()
	r := req
	r.Wait = 5 * time.Second
	cs, err := be.Fetch(ctx, r)
	if err != nil || len(cs) != 1 || cs[0].ID != "lost" {
		t.Fatalf("fetch: %d claims, %v", len(cs), err)
	}
	if took := time.Since(stored); took > recheck+time.Second {
		t.Fatalf("an unannounced batch took %v to be claimed, want about IdleRecheck (%v)", took, recheck)
	}
}

// TestWakerRestRacesWakeUp: a wake-up that arrives between a queue's plan and its rest keeps
// the queue due, and a subscription break ends every rest and stops the skipping.
func TestWakerRestRacesWakeUp(t *testing.T) {
	t.Parallel()
	w := newWaker(nil, slog.New(slog.DiscardHandler))
	const ch = "c"
	w.subs[ch] = make(chan struct{})
	w.live[ch] = true
	now := time.Now()
	until := now.Add(time.Minute)

	skip, gens := w.plan([]string{ch}, now)
	if skip[0] {
		t.Fatal("a queue never looked at was skipped")
	}
	w.rest(ch, gens[0], rest{from: until, until: until})
	if skip, _ = w.plan([]string{ch}, now); !skip[0] {
		t.Fatal("a resting queue was not skipped")
	}
	if d := w.nextLook([]string{ch}, now); d != time.Minute {
		t.Fatalf("nextLook = %v, want 1m", d)
	}

	_, gens = w.plan([]string{ch}, now)
	w.wakeChannel(ch) // arrives while the claim is in flight
	w.rest(ch, gens[0], rest{from: until, until: until})
	if skip, _ = w.plan([]string{ch}, now); skip[0] {
		t.Fatal("a wake-up racing the claim was lost: the queue rests")
	}

	_, gens = w.plan([]string{ch}, now)
	w.rest(ch, gens[0], rest{from: until, until: until})
	w.wakeAll() // the subscription broke
	if skip, _ = w.plan([]string{ch}, now); skip[0] {
		t.Fatal("a queue was skipped after its subscription broke")
	}
	_, gens = w.plan([]string{ch}, now)
	w.rest(ch, gens[0], rest{from: until, until: until})
	if skip, _ = w.plan([]string{ch}, now); skip[0] {
		t.Fatal("a queue was skipped before the server confirmed its channel again")
	}
}

// TestWakerRechecksRideAlong: a queue whose recheck may come early is claimed with another
// queue that is claimed anyway, and not on its own before its rest ends.
func TestWakerRechecksRideAlong(t *testing.T) {
	t.Parallel()
	w := newWaker(nil, slog.New(slog.DiscardHandler))
	now := time.Now()
	chs := []string{"due", "early", "late"}
	for _, ch := range chs {
		w.subs[ch] = make(chan struct{})
		w.live[ch] = true
	}
	w.quiet["due"] = rest{from: now.Add(-time.Second), until: now.Add(-time.Millisecond)}
	w.quiet["early"] = rest{from: now.Add(-time.Second), until: now.Add(time.Second)}
	w.quiet["late"] = rest{from: now.Add(time.Second), until: now.Add(2 * time.Second)}
	skip, _ := w.plan(chs, now)
	if skip[0] || skip[1] || !skip[2] {
		t.Fatalf("skip = %v, want [false false true]: the early recheck rides along, the late one waits", skip)
	}
	skip, _ = w.plan(chs[1:], now)
	if !skip[0] || !skip[1] {
		t.Fatalf("skip = %v, want [true true]: nothing is claimed, so no recheck comes early", skip)
	}
	if d := w.nextLook(chs[1:], now); d != time.Second {
		t.Fatalf("nextLook = %v, want 1s", d)
	}
}
