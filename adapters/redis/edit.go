package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

var (
	_ core.BatchEditor    = (*Backend)(nil)
	_ core.BatchExpediter = (*Backend)(nil)
)

// The edit operations of editScript.
const (
	editReplace  = "replace"  // a new body for the batch
	editRemove   = "remove"   // the batch removed (a cancel)
	editExpedite = "expedite" // due now, with a new body
)

// Replies of editScript.
const (
	editDone  = 1  // changed
	editGone  = 0  // no such batch (settled, dropped or never stored)
	editBusy  = -1 // in flight under a live lease
	editReady = 2  // expedite of a batch already ready: left as it is
)

// editScript changes one unclaimed batch of a queue, for operators (Inspector.Cancel and
// RunNow without a ledger). ARGV: id, op (editReplace, editRemove, editExpedite), body, wake
// channel. KEYS are the queue's (see scripts.go and ordering.go).
//
// A batch whose lease has ended is first taken back as the next claim would take it (its
// token cleared, so its old claimant's settle is refused as lease lost); one under a live
// lease is busy. A removed batch leaves its ordering key as an ack leaves it when it is the
// key's head (the next batch of the key becomes due); one further back in its key is unlinked
// (its predecessor, found in knext, points past it, and the key's tail moves back when it was
// the tail). An expedited batch that is delayed becomes due now; one held behind its key's
// head gets its own due time (hdue) set to now and still waits for its key. A prioritized
// batch keeps its lead (see priority.go): every score it gets here is its due time minus it,
// and a removed one forgets it.
var editScript = goredis.NewScript(nowLua + leadLua + fairLua + `
local id, op = ARGV[1], ARGV[2]
fairOn = redis.call('EXISTS', FK) == 1
if redis.call('HEXISTS', KEYS[2], id) == 0 then return 0 end
local leaseEnd = redis.call('ZSCORE', KEYS[3], id)
if leaseEnd then
  if tonumber(leaseEnd) > now then return -1 end
  redis.call('ZREM', KEYS[3], id)
  local v = redis.call('HGET', KEYS[4], id) or '0'
  redis.call('HSET', KEYS[4], id, string.match(v, '^%d+') or '0')
  redis.call('ZADD', KEYS[1], tonumber(leaseEnd) - leadOf(id), id)
  fairAdd(id, tonumber(leaseEnd) - leadOf(id))
end
local due = redis.call('ZSCORE', KEYS[1], id)
if op == 'replace' then
  redis.call('HSET', KEYS[2], id, ARGV[3])
  return 1
end
if op == 'expedite' then
  if due then
    if tonumber(due) + leadOf(id) <= now then return 2 end
    redis.call('HSET', KEYS[2], id, ARGV[3])
    redis.call('ZADD', KEYS[1], now - leadOf(id), id)
    fairAdd(id, now - leadOf(id))
    redis.call('PUBLISH', ARGV[4], '1')
    return 1
  end
  if redis.call('HEXISTS', KEYS[8], id) == 1 then
    redis.call('HSET', KEYS[2], id, ARGV[3])
    redis.call('HSET', KEYS[8], id, now)
    return 1
  end
  return 2 -- stored but in no set: the next claim drops it (see claimScript)
end
-- remove
redis.call('HDEL', KEYS[2], id)
redis.call('HDEL', KEYS[4], id)
if hasLead then redis.call('HDEL', KEYS[9], id) end
local key = redis.call('HGET', KEYS[7], id)
if due then
  redis.call('ZREM', KEYS[1], id)
  fairRem(id)
end
if fairOn then redis.call('HDEL', FK, id) end
if not key then return 1 end
redis.call('HDEL', KEYS[7], id)
local nxt = redis.call('HGET', KEYS[6], id)
redis.call('HDEL', KEYS[6], id)
if redis.call('HEXISTS', KEYS[8], id) == 0 then
  -- the key's head: the next batch of the key becomes due, as after an ack
  if nxt then
    local d = tonumber(redis.call('HGET', KEYS[8], nxt)) or now
    redis.call('HDEL', KEYS[8], nxt)
    redis.call('ZADD', KEYS[1], d - leadOf(nxt), nxt)
    fairAdd(nxt, d - leadOf(nxt))
    redis.call('PUBLISH', ARGV[4], '1')
  elseif redis.call('HGET', KEYS[5], key) == id then
    redis.call('HDEL', KEYS[5], key)
  end
  return 1
end
-- held further back in its key: unlink it
redis.call('HDEL', KEYS[8], id)
local links = redis.call('HGETALL', KEYS[6])
local prev
for i = 1, #links, 2 do
  if links[i + 1] == id then prev = links[i] break end
end
if prev then
  if nxt then redis.call('HSET', KEYS[6], prev, nxt) else redis.call('HDEL', KEYS[6], prev) end
end
if redis.call('HGET', KEYS[5], key) == id then
  if prev then redis.call('HSET', KEYS[5], key, prev) else redis.call('HDEL', KEYS[5], key) end
end
return 1
`)

// ReplaceBatch implements core.BatchEditor, for cancelling without a ledger: it replaces the
// body of the unclaimed batch id of queue, or removes the batch when body is nil (on an
// ordered queue the key's next batch becomes due when it was the key's head, and one further
// back is unlinked from its key). One script, so it never races a claim. A batch under a live
// lease is not changed (core.ErrNotCancellable), nor one that is gone (core.ErrMessageNotFound).
// The script reads the queue's whole knext hash when it unlinks a batch held behind its key's
// head: an operator's call, not for the hot path.
func (be *Backend) ReplaceBatch(ctx context.Context, queue, id string, body []byte) error {
	op := editReplace
	if body == nil {
		op = editRemove
	}
	return be.edit(ctx, "cancel batch", queue, id, op, body)
}

// ExpediteBatch implements core.BatchExpediter: the unclaimed batch id of queue, delayed or
// waiting to retry, takes body and becomes due now (with a wake-up); one held behind the head
// of its ordering key gets its own due time set to now and still waits for its key. A ready
// batch is left as it is; one under a live lease is not changed (core.ErrNotCancellable), nor
// one that is gone (core.ErrMessageNotFound).
func (be *Backend) ExpediteBatch(ctx context.Context, queue, id string, body []byte) error {
	return be.edit(ctx, "expedite batch", queue, id, editExpedite, body)
}

// edit runs editScript and maps its reply to the core sentinels.
func (be *Backend) edit(ctx context.Context, what, queue, id, op string, body []byte) error {
	if err := be.usable(what, queue); err != nil {
		return err
	}
	k := be.keys.keys(queue)
	n, err := editScript.Run(ctx, be.rdb, k.script, id, op, body, k.wake).Int()
	if err != nil {
		return be.wrap(fmt.Sprintf("%s %s of queue %q", what, id, queue), err)
	}
	switch n {
	case editGone:
		return fmt.Errorf("%w: redis: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case editBusy:
		return fmt.Errorf("%w: redis: batch %s of queue %q is running", core.ErrNotCancellable, id, queue)
	}
	return nil
}
