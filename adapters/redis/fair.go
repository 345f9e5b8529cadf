package redis

import "github.com/txmq/txmq/core"

// Fair share by key (core.FairSharer, core.FairPrioritizer). The due set stays the queue's
// one record of its unclaimed batches by due time (depths, inspection, edits and every other
// script read it as before); a fair queue keeps beside it, under the same hash tag (so every
// script still touches one Redis Cluster slot):
//
//	{prefix:queue}:fair       STRING the queue is fair: a publish without a key gives its batch key ""
//	{prefix:queue}:fair:key   HASH   batch id -> its fairness key (OutgoingBatch.FairKey; "" is a key)
//	{prefix:queue}:fair:q:K   ZSET   the batches of key K that are in the due set, with the same scores
//	{prefix:queue}:fair:ring  ZSET   the keys whose set is not empty, scored by turn (lowest next)
//
// Every script that adds a batch to the due set (publish, a retry, an expired lease taken
// back, the next batch of an ordering key becoming its head, an edit) adds it to its key's fq
// set as well, and one that removes it (a claim, a cancel) removes it there; a key enters the
// ring at the end of the turn when its set gets its first batch and leaves it when the set
// empties, so the ring holds exactly the keys with unclaimed batches. Only the marker is
// passed to the scripts (KEYS[10]); they build the other names from it, so a queue that is
// not fair sends one key more than before, not four: Redis Cluster serves them because they
// carry the queue's hash tag, as BullMQ's scripts do with theirs.
//
// The claim script of a fair queue (core.QueueSlots.Fair) walks the ring from its lowest
// score: for each key it takes the key's best ready batch (the lowest score of its fq set
// that is due; on a prioritized queue due time minus lead, checking the leads of up to 16
// entries as dueByLead does) and moves the key to the end of the turn; a key with nothing
// ready yet moves to the end too (it loses nothing); a key at its KeyLimit keeps its place.
// It goes round again while it has room and served a key in the round, probing at most 1,000
// keys per claim. So a ready batch waits at most one claim per other key with ready work
// ahead of it in turn. The batch's key stays in fkey while it runs, so a retry or an expired
// lease puts it back into its key's turn; an ack, a drop or a cancel forgets it. A claim of
// a fair queue marks its handles fair, and their settles tell the settle script so
// (ARGV[2]); a claim that is not fair drops the keys of the batches it takes, so a settle
// without the mark never leaves one behind.
//
// KeyLimit (core.QueueSlots.KeyLimit): the claim reads the queue's live leases (those ending
// after the server's now) and their keys, and passes over a key with KeyLimit of them. The
// settle of such a queue wakes waiting fetches, as a limited queue's does.
//
// Precedence: on an ordered queue only a key's head is ever in the due set (ordering.go), so
// per-key order comes first, then the fair turn, then priority within the key.
//
// Switching a queue to Fair: batches stored before it (with no fkey entry) are adopted into
// the empty key's turn as the claim finds them among the first 16 ready entries of the due
// set, which is where the oldest are. A queue that stops being Fair is claimed from the due
// set as before, each claim removing its batches from their fq sets, so nothing is stranded
// either way.
//
// Cost: a fair queue's publish adds an HSET and a ZADD (and a PUBLISH when its key enters
// the turn), its claim a few commands per key probed, its settles an HDEL; a queue that is
// not fair pays one EXISTS per publish and per claim (is it marked fair?) and one key name
// more per script call, nothing per settle.

var (
	_ core.FairSharer      = (*Backend)(nil)
	_ core.FairPrioritizer = (*Backend)(nil)
)

// SharesFairly implements core.FairSharer: the claim script takes a fair queue's batches
// round-robin across their fairness keys.
func (be *Backend) SharesFairly() error { return nil }

// SharesFairlyByPriority implements core.FairPrioritizer: within a key, batches go by due
// time minus lead as on any prioritized queue.
func (be *Backend) SharesFairlyByPriority() error { return nil }

// fairKeyArg is a batch's fairness key as the publish scripts take it: "" for a batch
// without one, else "=" and the key (so the empty key of a fair queue is "=").
func fairKeyArg(b core.OutgoingBatch) string {
	if b.FairKey == "" {
		return ""
	}
	return "=" + b.FairKey
}

// fairLua defines, for every script that moves batches in or out of the due set, FK, FR and
// FQ (the names of the queue's fkey hash, ring and the prefix of its per-key sets, built from
// the marker KEYS[10]), fairOn (the queue has batches with a fairness key; false until the
// script sets it), fairAdd(id, score) (after the
// batch was added to the due set with score: mirror it into its key's fq set and the key into
// the ring; returns true when the key joined the ring), fairRem(id) (after the batch left the
// due set) and ringEnd(k) (move key k to the end of the turn).
const fairLua = `
local FK, FR, FQ = KEYS[10] .. ':key', KEYS[10] .. ':ring', KEYS[10] .. ':q:'
local fairOn = false
local function ringEnd(k)
  local top = redis.call('ZRANGE', FR, -1, -1, 'WITHSCORES')
  if top[1] == k then return end
  redis.call('ZADD', FR, (tonumber(top[2]) or 0) + 1, k)
end
local function fairAdd(id, score)
  if not fairOn then return false end
  local k = redis.call('HGET', FK, id)
  if not k then return false end
  redis.call('ZADD', FQ .. k, score, id)
  if redis.call('ZSCORE', FR, k) then return false end
  ringEnd(k)
  return true
end
local function fairRem(id)
  if not fairOn then return end
  local k = redis.call('HGET', FK, id)
  if not k then return end
  local set = FQ .. k
  if redis.call('ZREM', set, id) == 1 and redis.call('EXISTS', set) == 0 then
    redis.call('ZREM', FR, k)
  end
end
`

// fairClaimLua defines fairClaim(max, keyLimit), the claim of a fair queue (see the top of
// this file): up to max ready ids, round-robin across the ring, removed from their fq sets
// and from the due set. It needs nowLua, bulkLua, leadLua and fairLua before it.
const fairClaimLua = `
local function firstReady(set)
  if not hasLead then
    return redis.call('ZRANGEBYSCORE', set, '-inf', now, 'LIMIT', 0, 1)[1]
  end
  local r = redis.call('ZRANGEBYSCORE', set, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 16)
  if #r == 0 then return nil end
  local cand = {}
  for i = 1, #r, 2 do cand[#cand + 1] = r[i] end
  local ls = redis.call('HMGET', KEYS[9], unpack(cand))
  for i, id in ipairs(cand) do
    local due = tonumber(r[2 * i]) + (tonumber(ls[i]) or 0)
    if due <= now then return id end
    if not early or due < early then early = due end
  end
  return nil
end
local function fairClaim(max, keyLimit)
  if redis.call('EXISTS', KEYS[10]) == 0 then redis.call('SET', KEYS[10], '1') end
  -- Batches stored before the queue was fair have no key: adopt them into the empty key's turn.
  local front = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, 16)
  if #front > 0 then
    local fids = {}
    for i = 1, #front, 2 do fids[#fids + 1] = front[i] end
    local ks = redis.call('HMGET', FK, unpack(fids))
    for i, id in ipairs(fids) do
      if not ks[i] then
        redis.call('HSET', FK, id, '')
        fairOn = true
        fairAdd(id, front[2 * i])
      end
    end
  end
  local ids = {}
  if not fairOn then return ids end
  local busy
  if keyLimit > 0 then
    busy = {}
    local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf')
    if #live > 0 then
      local ks = bulk('HMGET', FK, live)
      for i = 1, #live do
        local k = ks[i] or ''
        busy[k] = (busy[k] or 0) + 1
      end
    end
  end
  local size = redis.call('ZCARD', FR)
  local off, probes, idle = 0, 0, 0 -- keys kept in place at the front; keys probed; since a serve
  while #ids < max and probes < 1000 and idle < size - off do -- fairScan
    local ring = redis.call('ZRANGE', FR, off, off + 99)
    if #ring == 0 then break end
    for _, k in ipairs(ring) do
      if #ids >= max or probes >= 1000 or idle >= size - off then break end
      if busy and (busy[k] or 0) >= keyLimit then
        off = off + 1 -- at its limit: keeps its place in the turn
      else
        probes = probes + 1
        idle = idle + 1
        local set = FQ .. k
        local id = firstReady(set)
        if id then
          ids[#ids + 1] = id
          redis.call('ZREM', set, id)
          if busy then busy[k] = (busy[k] or 0) + 1 end
          idle = 0
        end
        if redis.call('EXISTS', set) == 0 then
          redis.call('ZREM', FR, k)
          size = size - 1
        else
          ringEnd(k)
        end
      end
    end
  end
  if #ids > 0 then bulk('ZREM', KEYS[1], ids) end
  return ids
end
`
