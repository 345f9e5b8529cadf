package redis

import (
	"context"
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// countCalls runs the Lua source src with EVAL, counting the Redis commands it calls, and
// returns the count and the script's reply. The count is what the server executes inside the
// script (each one a command lookup, argument objects and a reply conversion), the cost that
// grows with the batches one call moves.
func countCalls(t *testing.T, rdb goredis.UniversalClient, src string, keys []string, args ...any) (int64, any) {
	t.Helper()
	wrapped := `
local __calls, __redis = 0, redis
local redis = {call = function(...) __calls = __calls + 1; return __redis.call(...) end}
local function __body()
` + src + `
end
local __reply = __body()
return {__calls, __reply}
`
	res, err := rdb.Eval(context.Background(), wrapped, keys, args...).Slice()
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	return res[0].(int64), res[1]
}

// TestScriptCommandsPerCallAreFixed: claiming or acking n batches of a queue in one script call
// costs a fixed number of Redis commands on the server, not a few per batch: at one message
// per batch the server's work per batch is what bounds the throughput.
func TestScriptCommandsPerCallAreFixed(t *testing.T) {
	t.Parallel()
	be := newTestBackend(t, "", nil)
	const n = 40
	publishN(t, be, "q", n)
	k := be.keys.keys("q")
	calls, reply := countCalls(t, be.rdb, claimLua, k.script, n, 10000, "tb.", "0", reclaimLimit)
	vals := reply.([]any)
	if got := (len(vals) - 2) / 4; got != n {
		t.Fatalf("claim script claimed %d batches; want %d", got, n)
	}
	if calls > 12 {
		t.Errorf("claim script of %d batches called %d Redis commands; want at most 12 (a fixed number per call)", n, calls)
	}
	args := []any{k.wake, "0"}
	for j := 2; j < len(vals); j += 4 {
		args = append(args, vals[j], vals[j+3], opAck, 0, "0", "", "0")
	}
	calls, reply = countCalls(t, be.rdb, settleLua, k.script, args...)
	res := reply.([]any)
	for i, r := range res {
		if r.(int64) != 1 {
			t.Fatalf("ack %d replied %v; want 1", i, r)
		}
	}
	if len(res) != n {
		t.Fatalf("settle script replied %d results; want %d", len(res), n)
	}
	if calls > 12 {
		t.Errorf("settle script acking %d batches called %d Redis commands; want at most 12 (a fixed number per call)", n, calls)
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Errorf("depth after acking every batch = %+v; want zero", d)
	}
	for _, key := range k.script {
		if m, err := be.rdb.Exists(context.Background(), key).Result(); err != nil || m != 0 {
			t.Errorf("key %s still exists (%d, %v) after acking every batch", key, m, err)
		}
	}
}

// TestSettleScriptMixedAndDuplicate: one settle call holding every kind of settle, and two
// settles of the same batch id (a stale claim and the current one), gives each the reply and
// effect it would have in a call of its own.
func TestSettleScriptMixedAndDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	publishN(t, be, "q", 5)
	k := be.keys.keys("q")
	claims := fetch(t, be, all("q"))
	if len(claims) != 5 {
		t.Fatalf("claimed %d; want 5", len(claims))
	}
	tok := func(i int) string { return claims[i].Handle.(*handle).token }
	args := []any{k.wake, "0",
		claims[0].ID, tok(0), opAck, 0, "0", "", "0",
		claims[1].ID, tok(1), opRetry, 0, "1", "new-body", "1",
		claims[2].ID, tok(2), opRetry, 60000, "0", "", "1",
		claims[3].ID, tok(3), opExtend, 90000, "0", "", "0",
		claims[4].ID, "stale", opAck, 0, "0", "", "0",
	}
	res, err := settleScript.Run(ctx, be.rdb, k.script, args...).Int64Slice()
	must(t, err)
	if res[0] != 1 || res[1] != 1 || res[2] != 1 || res[3] < 2 || res[4] != -1 {
		t.Fatalf("mixed settle replies %v; want [1 1 1 <lease end> -1]", res)
	}
	if d := depth(t, be, "q"); d != (core.Depth{Ready: 1, InFlight: 2, Delayed: 1}) {
		t.Errorf("depth after the mixed settle = %+v; want 1 ready, 2 in flight, 1 delayed", d)
	}
	if b, _ := be.rdb.HGet(ctx, k.script[1], claims[1].ID).Result(); b != "new-body" {
		t.Errorf("rewritten body = %q; want new-body", b)
	}
	again := fetch(t, be, all("q"))
	if len(again) != 1 || again[0].ID != claims[1].ID || again[0].Deliveries != 1 || string(again[0].Body) != "new-body" {
		t.Fatalf("claim after the rewrite = %+v; want batch %s, delivery 1, the new body", again, claims[1].ID)
	}
	// The same id twice: the stale token first, then the current one, then the stale one again.
	cur := again[0].Handle.(*handle).token
	args = []any{k.wake, "0",
		again[0].ID, tok(1), opAck, 0, "0", "", "0",
		again[0].ID, cur, opAck, 0, "0", "", "0",
		again[0].ID, cur, opAck, 0, "0", "", "0",
	}
	res, err = settleScript.Run(ctx, be.rdb, k.script, args...).Int64Slice()
	must(t, err)
	if fmt.Sprint(res) != "[-1 1 -1]" {
		t.Fatalf("duplicate settle replies %v; want [-1 1 -1]", res)
	}
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: 2, Delayed: 1}) {
		t.Errorf("depth after the duplicate settle = %+v; want 2 in flight, 1 delayed", d)
	}
}

// TestScriptsChunkLargeCalls: a claim and a settle of more batches than one variadic command
// takes (1000 arguments) split their commands into chunks and still move every batch.
func TestScriptsChunkLargeCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	const n = 1500
	k := be.keys.keys("q")
	pipe := be.rdb.Pipeline()
	for i := range n {
		publishScript.Run(ctx, pipe, k.script, fmt.Sprintf("b%d", i), "body", 0, k.wake)
	}
	_, err := pipe.Exec(ctx)
	must(t, err)
	vals, err := claimScript.Run(ctx, be.rdb, k.script, n, 10000, "tb.", "0", reclaimLimit).Slice()
	must(t, err)
	if got := (len(vals) - 2) / 4; got != n {
		t.Fatalf("claimed %d batches; want %d", got, n)
	}
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: n}) {
		t.Fatalf("depth after the claim = %+v; want %d in flight", d, n)
	}
	args := []any{k.wake, "0"}
	for j := 2; j < len(vals); j += 4 {
		if vals[j+1] != "body" || vals[j+2] != int64(1) {
			t.Fatalf("claim %v: body %v, deliveries %v; want body, 1", vals[j], vals[j+1], vals[j+2])
		}
		args = append(args, vals[j], vals[j+3], opRetry, 60000, "0", "", "0")
	}
	res, err := settleScript.Run(ctx, be.rdb, k.script, args...).Int64Slice()
	must(t, err)
	for i, r := range res {
		if r != 1 {
			t.Fatalf("retry %d replied %d; want 1", i, r)
		}
	}
	if len(res) != n {
		t.Fatalf("%d replies; want %d", len(res), n)
	}
	if d := depth(t, be, "q"); d != (core.Depth{Delayed: n}) {
		t.Fatalf("depth after the retries = %+v; want %d delayed", d, n)
	}
}
