package redis

import goredis "github.com/redis/go-redis/v9"

// Every state change of a queue is one of these Lua scripts, run with EVALSHA (EVAL when the
// server's script cache was flushed). A script runs atomically on the server, so a client that
// crashes between two of its calls never leaves a batch half moved: it is in exactly one of the
// due or lease sets, or gone.
//
// The keys of every script (see keys.go) are one queue's keys, in this order:
//
//	KEYS[1] due    sorted set: batch id -> due time (ms); ready when due <= now, delayed otherwise
//	KEYS[2] body   hash: batch id -> encoded envelope
//	KEYS[3] lease  sorted set: batch id -> lease end (ms); the batches in flight
//	KEYS[4] dlv    hash: batch id -> handouts since stored or last rewritten (Claim.Deliveries)
//	KEYS[5] tok    hash: batch id -> token of the current lease
//
// They all share the queue's hash tag, so a script touches one Redis Cluster slot. Times come
// from the server's TIME (allowed in scripts since Redis 5 with effects replication, the only
// mode in Redis 7), so nodes whose clocks disagree still agree on due times and lease ends;
// clients only ever send durations.

// nowLua sets the local now to the server time in milliseconds.
const nowLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// publishScript stores a batch. ARGV: id, body, delay ms, wake channel. A batch id that is
// already stored is left alone (returns 0): a publish retried after a lost reply, or an outbox
// row published twice, does not reset a batch that may be in flight.
//
// The wake-up is sent only when the queue had no ready batch: a fetch waits on a queue only
// after its claim found nothing ready there (an Exclusive queue with a live lease aside, which
// the settle wakes), so while ready batches are queued nobody waits for this one, and a
// backlog being published costs no PUBLISH per batch (nor a wake-up on every subscribed node).
var publishScript = goredis.NewScript(nowLua + `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)[1]
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], 0)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
if not ready then redis.call('PUBLISH', ARGV[4], '1') end
return 1
`)

// claimScript reclaims expired leases and claims due batches. ARGV: max claims, lease ms,
// token base, exclusive ('1' or '0'), reclaim limit.
//
// Expired leases go back to the due set (scored by their lease end, so they are due at once);
// their Deliveries grow at the next handout. An Exclusive queue claims at most one batch, and
// none while any lease is live: the lease set is the cluster-wide record of what is in flight,
// so "no live lease" is exactly the Exclusive condition, released by every settle (which
// removes the lease) and by lease expiry, with no second lock key that could disagree with it.
//
// Reply: {now, next, id1, body1, deliveries1, token1, id2, ...}. next is, when nothing was
// claimed, how many ms until something may become claimable without a publish or settle (the
// earliest future due time or lease end), -1 when nothing is pending; 0 when claims were made.
var claimScript = goredis.NewScript(nowLua + `
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[5]))
for i = 1, #expired, 2 do
  local id = expired[i]
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZADD', KEYS[1], expired[i + 1], id)
end
local max = tonumber(ARGV[1])
if ARGV[4] == '1' then
  if redis.call('ZCARD', KEYS[3]) > 0 then max = 0 elseif max > 1 then max = 1 end
end
local out = {now, 0}
local orphan = false
if max > 0 then
  local leaseEnd = now + tonumber(ARGV[2])
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max)
  for i, id in ipairs(ids) do
    redis.call('ZREM', KEYS[1], id)
    local body = redis.call('HGET', KEYS[2], id)
    if body then
      local tok = ARGV[3] .. ':' .. i
      redis.call('ZADD', KEYS[3], leaseEnd, id)
      local d = redis.call('HINCRBY', KEYS[4], id, 1)
      redis.call('HSET', KEYS[5], id, tok)
      out[#out + 1] = id
      out[#out + 1] = body
      out[#out + 1] = d
      out[#out + 1] = tok
    else
      redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      orphan = true
    end
  end
end
if #out > 2 then return out end
if orphan then
  out[2] = 1 -- only entries without a body were due: more may be ready behind them
  return out
end
local nxt = -1
local function consider(score)
  local d = tonumber(score) - now
  if d < 1 then d = 1 end
  if nxt < 0 or d < nxt then nxt = d end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if due[2] then consider(due[2]) end
local lease = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if lease[2] then consider(lease[2]) end
out[2] = nxt
return out
`)

// Settle operations, the op of a settleScript entry.
const (
	opAck    = "ack"    // remove the batch (Ack and Drop)
	opRetry  = "retry"  // release the lease; due again after the delay
	opExtend = "extend" // push the lease end
)

// settleArgs is how many ARGV entries one settle takes in settleScript.
const settleArgs = 7

// settleScript settles or extends one or more claims of one queue (the settle batcher packs
// the concurrent settles of a queue into one call). ARGV: wake channel, then settleArgs
// entries per settle: id, token, op, ms (retry delay or lease), has body ('1' to rewrite),
// body, notify ('1' to publish a wake-up).
//
// Each settle is checked on its own: the claim must hold the batch's current token and its
// lease must not have ended; otherwise its reply is -1 (lease lost) and nothing changes,
// except that a lease found expired is reclaimed on the spot so the batch does not wait for
// the next claim. A reply of 1 means done; for extend the reply is the new lease end in ms.
// Reply: one integer per settle, in order. At most one wake-up is published per call.
var settleScript = goredis.NewScript(nowLua + `
local out = {}
local wake = false
for base = 2, #ARGV, 7 do -- settleArgs
  local id = ARGV[base]
  local res = 1
  if redis.call('HGET', KEYS[5], id) ~= ARGV[base + 1] then
    res = -1
  else
    local leaseEnd = redis.call('ZSCORE', KEYS[3], id)
    if not leaseEnd or tonumber(leaseEnd) <= now then
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[5], id)
      if leaseEnd and redis.call('HEXISTS', KEYS[2], id) == 1 then
        redis.call('ZADD', KEYS[1], leaseEnd, id)
        wake = true
      end
      res = -1
    else
      local op = ARGV[base + 2]
      if op == 'extend' then
        res = now + tonumber(ARGV[base + 3])
        redis.call('ZADD', KEYS[3], res, id)
      else
        redis.call('ZREM', KEYS[3], id)
        redis.call('HDEL', KEYS[5], id)
        if op == 'ack' then
          redis.call('HDEL', KEYS[2], id)
          redis.call('HDEL', KEYS[4], id)
        else
          if ARGV[base + 4] == '1' then
            redis.call('HSET', KEYS[2], id, ARGV[base + 5])
            redis.call('HSET', KEYS[4], id, 0)
          end
          redis.call('ZADD', KEYS[1], now + tonumber(ARGV[base + 3]), id)
        end
        if ARGV[base + 6] == '1' then wake = true end
      end
    end
  end
  out[#out + 1] = res
end
if wake then redis.call('PUBLISH', ARGV[1], '1') end
return out
`)

// depthScript counts one queue's batches by state at the server's now, read-only. An expired
// lease not yet reclaimed counts as ready, as the next claim will see it. Reply: {ready,
// inflight, delayed}.
var depthScript = goredis.NewScript(nowLua + `
local ready = redis.call('ZCOUNT', KEYS[1], '-inf', now) + redis.call('ZCOUNT', KEYS[3], '-inf', now)
local delayed = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local inflight = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
return {ready, inflight, delayed}
`)
