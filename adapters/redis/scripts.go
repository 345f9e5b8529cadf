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
//	KEYS[4] dlv    hash: batch id -> handouts since stored or last rewritten (Claim.Deliveries),
//	               while leased followed by ':' and the rest of the lease token: "3:<token base>";
//	               the whole value is the lease's token
//
// They all share the queue's hash tag, so a script touches one Redis Cluster slot. Times come
// from the server's TIME (allowed in scripts since Redis 5 with effects replication, the only
// mode in Redis 7), so nodes whose clocks disagree still agree on due times and lease ends;
// clients only ever send durations.

// bulkLua defines bulk(cmd, key, args): redis.call(cmd, key, args...) in chunks of at most 1000
// arguments (bulkChunk; Lua's unpack is limited to a few thousand values), returning the
// reply (the concatenated replies of the chunks, when the command replies with an array; an
// empty table when args is empty, without calling it). args holds whole entries
// (pairs for ZADD and HSET), and bulkChunk is even, so no entry is split.
const bulkLua = `
local function bulk(cmd, key, args)
  local n = #args
  if n == 0 then return {} end
  if n <= 1000 then return redis.call(cmd, key, unpack(args)) end -- bulkChunk
  local res = {}
  for i = 1, n, 1000 do
    local r = redis.call(cmd, key, unpack(args, i, math.min(i + 999, n)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do res[#res + 1] = v end
    end
  end
  return res
end
`

// dlvLua defines handouts(v), the Deliveries a dlv value holds ("<n>", or "<n>:<base>" while
// leased; 0 for none), and unleased(v), v without its token.
const dlvLua = `
local function unleased(v)
  return string.match(v, '^%d+') or '0'
end
local function handouts(v)
  if not v then return 0 end
  return tonumber(v) or tonumber(unleased(v))
end
`

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
//
// ARGV[5], when present and not empty, is the batch's ordering key (see ordering.go): the
// batch becomes the key's tail; behind an earlier batch of its key it is held (in no set, its
// due time kept in hdue) instead of entering the due set. ARGV[6], when present and above 0,
// is the batch's lead in ms (see priority.go): kept in KEYS[9], and taken off its score.
// ARGV[7], when not empty, is "=" and the batch's fairness key (see fair.go): kept in the
// queue's fkey hash, and the queue marked fair (KEYS[10]); on a queue marked fair a batch without one gets the
// empty key. A fair batch entering the due set enters its key's fq set too, and a key joining
// the turn wakes the fetches (a fetch may wait on a fair queue with ready batches, all of keys
// at their KeyLimit).
var publishScript = goredis.NewScript(nowLua + fairLua + publishLua)

// publishLua is publishScript's body after nowLua (publishDedupScript runs it too).
const publishLua = `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], 0)
local fk = ARGV[7]
if fk and fk ~= '' then
  redis.call('SET', KEYS[10], '1')
  fk = string.sub(fk, 2)
elseif redis.call('EXISTS', KEYS[10]) == 1 then
  fk = ''
else
  fk = nil
end
if fk then
  redis.call('HSET', FK, ARGV[1], fk)
  fairOn = true
end
local lead = tonumber(ARGV[6]) or 0
if lead > 0 then redis.call('HSET', KEYS[9], ARGV[1], lead) end
local key = ARGV[5]
if key and key ~= '' then
  redis.call('HSET', KEYS[7], ARGV[1], key)
  local tail = redis.call('HGET', KEYS[5], key)
  redis.call('HSET', KEYS[5], key, ARGV[1])
  if tail then
    redis.call('HSET', KEYS[6], tail, ARGV[1])
    redis.call('HSET', KEYS[8], ARGV[1], now + tonumber(ARGV[3]))
    return 1
  end
end
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)[1]
local score = now + tonumber(ARGV[3]) - lead
redis.call('ZADD', KEYS[1], score, ARGV[1])
local joined = fk and fairAdd(ARGV[1], score)
if not ready or joined then redis.call('PUBLISH', ARGV[4], '1') end
return 1
`

// claimScript reclaims expired leases and claims due batches. ARGV: max claims, lease ms,
// token base, exclusive ('1' or '0'), reclaim limit, the queue's cluster-wide limit
// (core.QueueSlots.Limit; '0' or absent: none), fair ('1': claim round-robin across the
// fairness keys, see fair.go; else from the due set) and the limit per fairness key
// (core.QueueSlots.KeyLimit; '0' or absent: none). A queue with a limit claims at most the
// limit minus its live leases (those ending after now, see clusterlimit.go).
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
var claimScript = goredis.NewScript(claimLua)

// claimLua is claimScript's source. Each Redis command acts on every batch the call moves at
// once (variadic ZREM, ZADD, HMGET, HSET, HDEL), so a claim of n batches costs a fixed number
// of commands on the server, not about five per batch.
const claimLua = nowLua + bulkLua + dlvLua + leadLua + fairLua + fairClaimLua + `
local fair = ARGV[7] == '1'
if fair then
  fairOn = redis.call('EXISTS', FK) == 1
elseif redis.call('EXISTS', KEYS[10], FK) > 0 then -- a queue that was fair
  redis.call('DEL', KEYS[10])
  fairOn = redis.call('EXISTS', FK) == 1
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[5]))
if #expired > 0 then
  local ids, due = {}, {}
  for i = 1, #expired, 2 do
    ids[#ids + 1] = expired[i]
    due[#due + 1] = expired[i + 1]
    due[#due + 1] = expired[i]
  end
  if hasLead then
    local ls = bulk('HMGET', KEYS[9], ids)
    for i = 1, #ids do due[2 * i - 1] = due[2 * i - 1] - (tonumber(ls[i]) or 0) end
  end
  bulk('ZREM', KEYS[3], ids)
  local vs = bulk('HMGET', KEYS[4], ids)
  local strip = {}
  for i, id in ipairs(ids) do
    if vs[i] then
      strip[#strip + 1] = id
      strip[#strip + 1] = unleased(vs[i])
    end
  end
  bulk('HSET', KEYS[4], strip)
  bulk('ZADD', KEYS[1], due)
  if fairOn then
    for i = 1, #due, 2 do fairAdd(due[i + 1], due[i]) end
  end
end
local max = tonumber(ARGV[1])
if ARGV[4] == '1' then
  if redis.call('ZCARD', KEYS[3]) > 0 then max = 0 elseif max > 1 then max = 1 end
end
local lim = tonumber(ARGV[6]) or 0
if lim > 0 then
  local live = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
  if live >= lim then max = 0 elseif max > lim - live then max = lim - live end
end
local out = {now, 0}
local orphan = false
if max > 0 then
  local ids
  if fair then
    ids = fairClaim(max, tonumber(ARGV[8]) or 0)
  else
    if hasLead then ids = dueByLead(max) else ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max) end
    if #ids > 0 then
      bulk('ZREM', KEYS[1], ids)
      if fairOn then -- batches of a queue that was fair: out of their keys' turn, and keyless
        for _, id in ipairs(ids) do fairRem(id) end
        bulk('HDEL', FK, ids)
      end
    end
  end
  if #ids > 0 then
    local bodies = bulk('HMGET', KEYS[2], ids)
    local dlvs = bulk('HMGET', KEYS[4], ids)
    -- Numbers are formatted here once, not per batch: Redis turns every number passed to
    -- redis.call into a string with snprintf("%.17g"), which costs more than the command.
    local leaseEnd = string.format('%d', now + tonumber(ARGV[2]))
    local toks = {} -- Deliveries -> token ("<n>:<base>"; a script claims a batch once)
    local leases, counts, gone = {}, {}, {}
    for i, id in ipairs(ids) do
      local body = bodies[i]
      if body then
        local d = handouts(dlvs[i]) + 1
        local tok = toks[d]
        if not tok then
          tok = d .. ':' .. ARGV[3]
          toks[d] = tok
        end
        leases[#leases + 1] = leaseEnd
        leases[#leases + 1] = id
        counts[#counts + 1] = id
        counts[#counts + 1] = tok
        out[#out + 1] = id
        out[#out + 1] = body
        out[#out + 1] = d
        out[#out + 1] = tok
      else
        gone[#gone + 1] = id
      end
    end
    if #leases > 0 then
      bulk('ZADD', KEYS[3], leases)
      bulk('HSET', KEYS[4], counts)
    end
    if #gone > 0 then
      bulk('HDEL', KEYS[4], gone)
      if fairOn then bulk('HDEL', FK, gone) end
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
if early then consider(early) end
local lease = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if lease[2] then consider(lease[2]) end
out[2] = nxt
return out
`

// Settle operations, the op of a settleScript entry.
const (
	opAck    = "ack"    // remove the batch (Ack and Drop)
	opRetry  = "retry"  // release the lease; due again after the delay
	opExtend = "extend" // push the lease end
)

// settleArgs is how many ARGV entries one settle takes in settleScript; an ack in its short
// form (opAckShort, opAckShortWake) takes only the first ackArgs of them.
const (
	settleArgs = 7
	ackArgs    = 3
)

// The short ack ops: an ack (or drop) given as id, token and op alone, without publishing a
// wake-up or with one. A one-message batch settles once per message, so each field less is one
// argument less for the client to send and the script to read per message.
const (
	opAckShort     = "a"
	opAckShortWake = "A"
)

// settleScript settles or extends one or more claims of one queue (the settle batcher packs
// the concurrent settles of a queue into one call). ARGV: wake channel, fair ('1' when some
// settle is of a fair claim: see fair.go), then per settle id,
// token, op and, unless op is a short ack (opAckShort, opAckShortWake), ms (retry delay or
// lease), has body ('1' to rewrite), body, notify ('1' to publish a wake-up).
//
// Each settle is checked on its own: the claim must hold the batch's current token and its
// lease must not have ended; otherwise its reply is -1 (lease lost) and nothing changes,
// except that a lease found expired is reclaimed on the spot so the batch does not wait for
// the next claim. A reply of 1 means done; for extend the reply is the new lease end in ms.
// Reply: one integer per settle, in order. At most one wake-up is published per call.
var settleScript = goredis.NewScript(settleLua)

// settleLua is settleScript's source. The tokens of all its settles are read with one HMGET,
// their lease ends with one ZMSCORE (one ZSCORE each on a server older than Redis 6.2) only
// when some lease of the queue has ended (one ZCOUNT tells), and their writes are gathered
// into one variadic command per kind, so a call settling n batches costs a fixed number of
// commands on the server; the lists of the writes no settle of the call makes are never
// created (each table is an allocation and garbage for Lua's collector, which costs more
// than a command). Only a lease found expired, which is rare, costs commands of its own.
// When one call holds two settles of the same batch id (two claims of it, one stale), they
// run one after the other instead, so each sees the other's effects exactly as in separate
// calls.
const settleLua = nowLua + bulkLua + leadLua + fairLua + `
fairOn = ARGV[2] == '1'
local ids, pos, seen, dup = {}, {}, {}, false
local n, i = 0, 3
while i <= #ARGV do
  local id = ARGV[i]
  n = n + 1
  ids[n] = id
  pos[n] = i
  if seen[id] then dup = true end
  seen[id] = true
  local op = ARGV[i + 2]
  if op == 'a' or op == 'A' then i = i + 3 else i = i + 7 end -- ackArgs, settleArgs
end
local function tokens(from, to)
  return redis.call('HMGET', KEYS[4], unpack(ids, from, to))
end
-- A batch holds a token exactly while it is in the lease set (claims, reclaims and settles
-- change both together), so a settle whose token matches holds a lease; when no lease of the
-- queue has ended (one ZCOUNT: scores are not read, as formatting and parsing each costs more
-- than the lookup), every such lease is live. Else each lease end is read.
local ended = redis.call('ZCOUNT', KEYS[3], '-inf', now) > 0
local function leaseEnds(from, to)
  if not ended then return {} end
  local ok, r = pcall(redis.call, 'ZMSCORE', KEYS[3], unpack(ids, from, to))
  if ok then return r end
  r = {}
  for k = from, to do r[#r + 1] = redis.call('ZSCORE', KEYS[3], ids[k]) end
  return r
end
-- The writes: ZREM lease, HDEL body and HDEL dlv (acks; retries use the first too), and,
-- created at first use, HSET body, HSET dlv, ZADD due (retries) and ZADD lease (extensions).
local zl, hb, hd = {}, {}, {}
local sb, sd, zd, ze
local function flush()
  bulk('ZREM', KEYS[3], zl)
  bulk('HDEL', KEYS[2], hb)
  bulk('HDEL', KEYS[4], hd)
  if hasLead then bulk('HDEL', KEYS[9], hb) end
  if fairOn then bulk('HDEL', FK, hb) end
  if sb then bulk('HSET', KEYS[2], sb) end
  if sd then bulk('HSET', KEYS[4], sd) end
  if zd then
    bulk('ZADD', KEYS[1], zd)
    if fairOn then
      for j = 1, #zd, 2 do fairAdd(zd[j + 1], zd[j]) end
    end
  end
  if ze then bulk('ZADD', KEYS[3], ze) end
  if dup then zl, hb, hd, sb, sd, zd, ze = {}, {}, {}, nil, nil, nil, nil end
end
local out = {}
local wake = false
-- An ordered queue's batches have a key (bkey); removing one makes the next of its key due.
local ordered = redis.call('EXISTS', KEYS[7]) == 1
local function nextOfKey(id)
  local key = redis.call('HGET', KEYS[7], id)
  if not key then return end
  redis.call('HDEL', KEYS[7], id)
  local nxt = redis.call('HGET', KEYS[6], id)
  if nxt then
    redis.call('HDEL', KEYS[6], id)
    local due = tonumber(redis.call('HGET', KEYS[8], nxt)) or now
    redis.call('HDEL', KEYS[8], nxt)
    redis.call('ZADD', KEYS[1], due - leadOf(nxt), nxt)
    fairAdd(nxt, due - leadOf(nxt))
    wake = true
  elseif redis.call('HGET', KEYS[5], key) == id then
    redis.call('HDEL', KEYS[5], key)
  end
end
-- settle k, given the batch's current token and lease end.
local function one(k, tok, leaseEnd)
  local p = pos[k]
  local id = ids[k]
  if tok ~= ARGV[p + 1] then return -1 end
  if ended and (not leaseEnd or tonumber(leaseEnd) <= now) then
    redis.call('ZREM', KEYS[3], id)
    redis.call('HSET', KEYS[4], id, string.match(tok, '^%d+') or '0')
    if leaseEnd and redis.call('HEXISTS', KEYS[2], id) == 1 then
      redis.call('ZADD', KEYS[1], tonumber(leaseEnd) - leadOf(id), id)
      fairAdd(id, tonumber(leaseEnd) - leadOf(id))
      wake = true
    end
    return -1
  end
  local op = ARGV[p + 2]
  if op == 'a' or op == 'A' then
    if op == 'A' then wake = true end
    op = 'ack'
  elseif ARGV[p + 6] == '1' then
    wake = true
  end
  if op == 'extend' then
    local res = now + tonumber(ARGV[p + 3])
    ze = ze or {}
    ze[#ze + 1] = res
    ze[#ze + 1] = id
    return res
  end
  zl[#zl + 1] = id
  if op == 'ack' then
    if ordered then nextOfKey(id) end
    hb[#hb + 1] = id
    hd[#hd + 1] = id
  else
    sd = sd or {}
    sd[#sd + 1] = id
    if ARGV[p + 4] == '1' then
      sb = sb or {}
      sb[#sb + 1] = id
      sb[#sb + 1] = ARGV[p + 5]
      sd[#sd + 1] = '0'
    else
      sd[#sd + 1] = string.match(tok, '^%d+') or '0'
    end
    zd = zd or {}
    zd[#zd + 1] = now + tonumber(ARGV[p + 3]) - leadOf(id)
    zd[#zd + 1] = id
  end
  return 1
end
if dup then
  for k = 1, n do
    out[k] = one(k, tokens(k, k)[1], leaseEnds(k, k)[1])
    flush()
  end
else
  for from = 1, n, 1000 do -- bulkChunk
    local to = math.min(from + 999, n)
    local toks, ends = tokens(from, to), leaseEnds(from, to)
    for k = from, to do out[k] = one(k, toks[k - from + 1], ends[k - from + 1]) end
  end
  flush()
end
if wake then redis.call('PUBLISH', ARGV[1], '1') end
return out
`

// depthScript counts one queue's batches by state at the server's now, read-only. An expired
// lease not yet reclaimed counts as ready, as the next claim will see it; a batch held behind
// an earlier one of its ordering key counts as delayed. oldest is the lowest score (ms) among
// the due entries of the ready set and the expired leases, two O(log n) range reads, -1 when
// none is ready. Reply: {ready, inflight, delayed, oldest}.
var depthScript = goredis.NewScript(nowLua + `
local ready = redis.call('ZCOUNT', KEYS[1], '-inf', now) + redis.call('ZCOUNT', KEYS[3], '-inf', now)
local delayed = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') + redis.call('HLEN', KEYS[8])
local inflight = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local oldest = -1
for _, k in ipairs({KEYS[1], KEYS[3]}) do
  local r = redis.call('ZRANGEBYSCORE', k, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
  if r[2] then
    local s = tonumber(r[2])
    if oldest < 0 or s < oldest then oldest = s end
  end
end
return {ready, inflight, delayed, oldest}
`)

// leadLua defines, for the claim and settle scripts, hasLead (the queue has batches with a
// lead: KEYS[9] exists), leadOf(id) (a batch's lead in ms, 0 for none) and dueByLead(max),
// the claim of a prioritized queue (see priority.go): up to max ids of the due set whose
// score plus lead is not after now, in score order, scanning at most leadScan entries of
// scores up to now; early is set to the earliest due time among the entries it skipped.
const leadLua = `
local hasLead = redis.call('EXISTS', KEYS[9]) == 1
local function leadOf(id)
  if not hasLead then return 0 end
  return tonumber(redis.call('HGET', KEYS[9], id)) or 0
end
local early
local function dueByLead(max)
  local ids, off, page = {}, 0, max + 16
  while #ids < max and off < 1024 do -- leadScan
    local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', off, page)
    if #r == 0 then break end
    local cand = {}
    for i = 1, #r, 2 do cand[#cand + 1] = r[i] end
    local ls = redis.call('HMGET', KEYS[9], unpack(cand))
    for i, id in ipairs(cand) do
      local due = tonumber(r[2 * i]) + (tonumber(ls[i]) or 0)
      if due <= now then
        if #ids < max then ids[#ids + 1] = id end
      elseif not early or due < early then
        early = due
      end
    end
    if #r < 2 * page then break end
    off = off + page
  end
  return ids
end
`
