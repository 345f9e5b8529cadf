package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// KeepsUnique implements core.UniqueKeeper: every mode, in the publish script (see
// publishUniqueScript).
func (be *Backend) KeepsUnique(core.UniqueMode) error { return nil }

// publishUniqueScript is publishScript for a unique batch (core.OutgoingBatch.Unique).
// KEYS[11] is the queue's key hash: unique key -> "<holder batch id>|<until ms>|<sha1 of the
// body stored>" (until: the end of a UniqueWindow hold, the publish time otherwise), KEYS[12]
// the cursor of its prune (KEYS[1..10] and ARGV[1..7] as for publishScript, the fairness key
// included). ARGV[8] is the key, ARGV[9] the mode (1 window, 2 until started, 3 until done, 4
// debounce) and ARGV[10] the window in ms (0 but for window and debounce). A debounce that
// removes its holder takes it out of its fairness key's turn too (fairRem).
//
// The holder is judged from the queue's own state: live while its body is stored; started
// once a claim handed it out (its dlv value counts a handout or carries a lease token) or a
// retry rewrote it (its body is not the one stored: the script never reads inside it). A key held by another batch stores
// nothing and returns {holder}; one held by the batch itself (a retried publish) returns 0; a
// debounce removes an unstarted holder (never held in an ordering lane: Ordered queues refuse
// debounce). Else the key moves to the batch and it is stored as publishScript does. Once the
// key hash holds more than 64 entries, about one call in 16 (those in a millisecond divisible
// by 16 on the server's clock) first looks at about 64 of them (HSCAN from the kept cursor)
// and deletes those whose window passed and whose holder is gone: a call adds at most one
// entry and the prune looks at four per call on average, so the hash stays near the size of
// the keys in use, at a fraction of the cost of looking at every call.
var publishUniqueScript = goredis.NewScript(nowLua + fairLua + `
local function holderOf(v)
  local id, untilms, sum = string.match(v, '^(.*)|(%d+)|(%x*)$')
  return id, tonumber(untilms), sum
end
local function startedOf(id, sum)
  local d = redis.call('HGET', KEYS[4], id)
  if d and (string.find(d, ':', 1, true) or (tonumber(string.match(d, '^%d+')) or 0) > 0) then return true end
  local body = redis.call('HGET', KEYS[2], id)
  return body ~= false and redis.sha1hex(body) ~= sum
end
if now % 16 == 0 and redis.call('HLEN', KEYS[11]) > 64 then
  local scan = redis.call('HSCAN', KEYS[11], redis.call('GET', KEYS[12]) or '0', 'COUNT', 64)
  redis.call('SET', KEYS[12], scan[1])
  for i = 1, #scan[2], 2 do
    local id, untilms = holderOf(scan[2][i + 1])
    if not untilms or untilms <= now and redis.call('HEXISTS', KEYS[2], id) == 0 then redis.call('HDEL', KEYS[11], scan[2][i]) end
  end
end
local mode = tonumber(ARGV[9])
local held = redis.call('HGET', KEYS[11], ARGV[8])
if held then
  local holder, untilms, sum = holderOf(held)
  local live = redis.call('HEXISTS', KEYS[2], holder) == 1
  local busy = false
  if mode == 1 then busy = untilms > now
  elseif mode == 2 then busy = live and not startedOf(holder, sum)
  elseif mode == 3 then busy = live
  elseif mode == 4 and live and holder ~= ARGV[1] and not startedOf(holder, sum) then
    fairOn = redis.call('EXISTS', KEYS[10]) == 1
    fairRem(holder)
    if fairOn then redis.call('HDEL', FK, holder) end
    redis.call('ZREM', KEYS[1], holder)
    redis.call('HDEL', KEYS[2], holder)
    redis.call('HDEL', KEYS[4], holder)
    redis.call('HDEL', KEYS[9], holder)
    live = false
  end
  if holder == ARGV[1] and (busy or (mode == 4 and live)) then return 0 end
  if busy then return {holder} end
end
redis.call('HSET', KEYS[11], ARGV[8], ARGV[1] .. '|' .. (now + tonumber(ARGV[10])) .. '|' .. redis.sha1hex(ARGV[2]))
` + publishLua)

// publishUnique runs publishUniqueScript: the batch is stored with its key moved to it, or
// nothing is stored and the batch holding the key comes back as a *core.UniqueError.
func (be *Backend) publishUnique(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	u := b.Unique
	windowMs := int64(0)
	if u.Mode == core.UniqueWindow {
		windowMs = u.Window.Milliseconds()
	}
	res, err := publishUniqueScript.Run(ctx, be.rdb, k.unique, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b), u.Key, int(u.Mode), windowMs).Result()
	if err != nil {
		return err
	}
	held, ok := res.([]any)
	if !ok || len(held) == 0 {
		return nil
	}
	return &core.UniqueError{Queue: b.Queue, Key: u.Key, Mode: u.Mode, Kept: fmt.Sprint(held[0])}
}
