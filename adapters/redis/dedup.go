package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// DedupIDs implements core.IDDeduper: exact, any window, per message id, in the publish
// script (see publishDedupScript).
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, nil }

// publishDedup runs publishDedupScript: the batch is stored with its ids recorded, or nothing
// is stored and the ids already held come back as a *core.DuplicateError.
func (be *Backend) publishDedup(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	windowMs := max(int64((b.DedupWindow+time.Millisecond-1)/time.Millisecond), 1)
	args := make([]any, 0, 8+len(b.DedupIDs))
	args = append(args, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b), windowMs)
	for _, id := range b.DedupIDs {
		args = append(args, id)
	}
	res, err := publishDedupScript.Run(ctx, be.rdb, k.dedup, args...).Result()
	if err != nil {
		return err
	}
	taken, ok := res.([]any)
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(taken))
	for _, v := range taken {
		ids = append(ids, fmt.Sprint(v))
	}
	return &core.DuplicateError{Queue: b.Queue, IDs: ids}
}

// publishDedupScript is publishScript for a batch whose caller ids deduplicate
// (core.IDDeduper). KEYS[11] is the queue's id set: a sorted set of id -> expiry (ms, server
// time). ARGV[8] is the window in ms and ARGV[9..] the batch's ids. It forgets expired ids;
// when any of the batch's ids is still held it stores nothing and returns those ids (a
// table); else it records every id until now + window, keeps the set's own TTL at least the
// window (so an idle queue's set goes away), and stores the batch as publishScript does.
var publishDedupScript = goredis.NewScript(nowLua + bulkLua + fairLua + `
local w = tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', now)
local taken = {}
for i = 9, #ARGV do
  if redis.call('ZSCORE', KEYS[11], ARGV[i]) then taken[#taken + 1] = ARGV[i] end
end
if #taken > 0 then return taken end
local add = {}
for i = 9, #ARGV do
  add[#add + 1] = now + w
  add[#add + 1] = ARGV[i]
end
bulk('ZADD', KEYS[11], add)
if redis.call('PTTL', KEYS[11]) < w then redis.call('PEXPIRE', KEYS[11], w) end
` + publishLua)
