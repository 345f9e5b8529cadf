package redis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// startRedisServer runs a throwaway redis-server (no persistence) on a free local port for
// the test and returns its address; it is stopped in t.Cleanup. Tests that must change
// server-wide state (SCRIPT FLUSH) use it instead of the shared server. Without
// redis-server on PATH the test is skipped, or fails when services are required (CI). extra
// are more server arguments ("--proto-max-bulk-len", "1mb").
func startRedisServer(t *testing.T, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not on PATH; this test runs its own server"
		if testenv.Required() {
			t.Fatalf("%s; CI=true or TXMQ_REQUIRE_SERVICES=1 make this a failure", msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, extra...)...)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})

	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(pctx).Err()
		pcancel()
		if err == nil {
			return addr
		}
		select {
		case werr := <-exited:
			t.Fatalf("redis-server on port %d exited: %v", port, werr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoScriptRecovery: after SCRIPT FLUSH (or a restart) every path that runs a script
// (publish, the pipelined claim of several queues, the batched settles of several queues,
// extend, depths) loads it again with EVAL and carries on, and runs nothing twice.
func TestNoScriptRecovery(t *testing.T) {
	addr := startRedisServer(t)
	be, err := New(&Options{Addr: addr, Prefix: "noscript", GoRedisLogs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()
	flush := func() {
		t.Helper()
		must(t, be.rdb.ScriptFlush(ctx).Err())
		for _, s := range []*goredis.Script{publishScript, claimScript, settleScript, depthScript} {
			ok, err := s.Exists(ctx, be.rdb).Result()
			if err != nil || ok[0] {
				t.Fatalf("script still cached after SCRIPT FLUSH: %v %v", ok, err)
			}
		}
	}
	queues := []string{"qa", "qb"}
	pub := func(round int) {
		t.Helper()
		for _, q := range queues {
			publish(t, be, q, fmt.Sprintf("%s-%d", q, round), time.Time{})
		}
	}

	for round := range 2 { // the first round runs with an empty cache too
		flush()
		pub(round) // one script call per publish: EVALSHA, then EVAL
		flush()
		claims := fetch(t, be, all("qa"), all("qb")) // one pipeline of two claim scripts
		if len(claims) != 2 {
			t.Fatalf("round %d: fetched %d claims after SCRIPT FLUSH; want 2", round, len(claims))
		}
		for _, c := range claims {
			if c.Deliveries != 1 {
				t.Fatalf("round %d: batch %s has Deliveries %d; want 1 (a claim script ran twice?)", round, c.ID, c.Deliveries)
			}
		}
		flush()
		must(t, be.Extend(ctx, claims[0], 10*time.Second))
		flush()
		// Both settles in one pipeline (two settle script calls), as concurrent Acks of two
		// queues are sent.
		reqs := make([]*settleReq, len(claims))
		for i, c := range claims {
			h := c.Handle.(*handle)
			reqs[i] = &settleReq{ctx: ctx, keys: be.keys.keys(c.Queue), res: make(chan settleRes, 1),
				args: [settleArgs]any{c.ID, h.token, opAck, 0, "0", nil, "0"}}
		}
		be.settles.flush(reqs)
		for i, r := range reqs {
			if res := <-r.res; res.err != nil || res.n != 1 {
				t.Fatalf("round %d: settle %d after SCRIPT FLUSH: %d, %v; want 1, nil", round, i, res.n, res.err)
			}
		}
		flush()
		d, err := be.Depths(ctx, queues) // one pipeline of two depth scripts
		must(t, err)
		for _, q := range queues {
			if d[q] != (core.Depth{}) {
				t.Fatalf("round %d: queue %s depth %+v after acking everything; want zeros", round, q, d[q])
			}
		}
	}

	// A settle that goes through the public path alone (one script call) recovers too.
	pub(9)
	claims := fetch(t, be, all("qa"))
	flush()
	must(t, be.Ack(ctx, claims[0]))
	if d := depth(t, be, "qa"); d != (core.Depth{}) {
		t.Fatalf("depth after Ack: %+v", d)
	}
	// The server saw the misses and the reloads: the recovery paths really ran.
	info := be.rdb.Info(ctx, "commandstats", "errorstats").Val()
	for _, want := range []string{"errorstat_NOSCRIPT:count=", "cmdstat_eval:calls="} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO lacks %q: NOSCRIPT was never hit or never recovered with EVAL:\n%s", want, info)
		}
	}
}
