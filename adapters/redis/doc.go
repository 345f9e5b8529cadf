// Package redis is the txmq backend on Redis (github.com/redis/go-redis/v9), for apps that
// outgrow their own database as a queue. It means exactly what the sqljobs and memory backends
// mean by every queue setting; the parity suite (package parity) proves it against a real
// server. Import it for its redis:// and rediss:// URL schemes, or call New:
//
//	be, err := redis.New(&redis.Options{Addr: "127.0.0.1:6379", Prefix: "myapp"})
//	node, err := core.NewNode(&core.NodeOptions{Backend: be})
//
//	TXMQ_BACKEND=redis://:secret@10.0.0.5:6379/0?txmq_prefix=myapp
//
// # Data layout
//
// Each queue has five keys, all under the hash tag {prefix:queue}:
//
//	{txmq:emails}:due    ZSET  batch id -> due time (ms, server clock): ready when due <= now
//	{txmq:emails}:body   HASH  batch id -> encoded envelope (opaque bytes)
//	{txmq:emails}:lease  ZSET  batch id -> lease end (ms, server clock): the batches in flight
//	{txmq:emails}:dlv    HASH  batch id -> handouts since stored or rewritten (Deliveries)
//	{txmq:emails}:tok    HASH  batch id -> token of the current lease
//
// and one Pub/Sub channel, {txmq:emails}:wake. A batch is in exactly one of due and lease, or
// gone (acked or dropped).
//
// Why this layout rather than Streams with consumer groups or lists plus a processing set:
//
//   - Delays are first class. One sorted set scored by due time holds ready, delayed and
//     retrying batches alike, so a delayed publish or a retry with backoff is one ZADD, and no
//     mover process has to shift batches from a delayed set into a list (a crash between the
//     two steps is how list-based queues lose or duplicate jobs). Streams have no delays.
//   - Leases are explicit. The lease set, scored by lease end, is the cluster-wide record of
//     what is in flight and until when; any node's claim reclaims expired entries, so a dead
//     node's batches come back without a reaper, and an extension is one ZADD.
//   - Every change is one Lua script (scripts.go): publish, claim (with the reclaim of expired
//     leases), ack/drop, retry, extend. A script runs atomically, so a node crashing between
//     two calls never leaves a batch owned twice or by nobody.
//   - A lease token per handout (the tok hash, carried in Claim.Handle) tells the current
//     holder from a node whose lease ran out: its settles and extensions fail with
//     core.ErrLeaseLost and change nothing.
//   - Exclusive needs no separate lock key: the claim script of an Exclusive queue claims one
//     batch, and none while the lease set holds a live lease. A lock key with a PX expiry
//     would be a second record of the same fact that could disagree with the lease set (key
//     expiry and script time are different clocks); the lease set is released by every
//     settle and by lease expiry by construction.
//   - Hash tags keep one queue's keys in one Redis Cluster slot, so every script is legal on
//     a cluster, and Fetch pipelines one script per queue in a single round trip (on a
//     cluster, go-redis splits the pipeline per node).
//
// Times are the server's (redis.call('TIME') inside the scripts), so nodes with skewed clocks
// agree on due times and lease ends; clients send only durations, rounded up to the
// millisecond, so nothing is ever due early.
//
// # Waiting for work
//
// A Fetch that finds nothing waits on the wake channels of its queues, which the publish and
// retry scripts (and settles of Exclusive batches) PUBLISH to in the same script. A publish
// sends its wake-up only when the queue had no ready batch: a fetch waits on a queue only
// after its claim found nothing ready there, so a queue with a backlog costs no PUBLISH (and
// no wake-up on every subscribed node) per batch. One Pub/Sub
// connection per Backend serves every waiting Fetch, so an idle node costs one idle connection
// and picks up new work within milliseconds; the wait also ends at the earliest due time or
// lease end the claim scripts reported, at Wait, or when ctx is cancelled.
//
// Pub/Sub rather than BLPOP on per-queue signal lists, because: BLPOP holds one pooled
// connection per waiting Fetch and cannot be interrupted by ctx (only by its own timeout, or
// by closing the connection); BLPOP over several queues' keys is illegal on a cluster (they
// live in different slots); and a signal list needs trimming or it grows while nobody waits.
// The cost is that Pub/Sub is not durable: a wake-up sent while the subscription reconnects
// is lost. Every break of the subscription ends the rest of every queue (see below) and
// stops the skipping until the server confirms the channel again; a wake-up lost without a
// break (which Redis does not do on a live connection) delays a pickup by at most
// Options.IdleRecheck. On a cluster, PUBLISH is broadcast to every node, so one subscription
// on any node hears every queue.
//
// # What an idle node costs
//
// A queue whose claim script found nothing rests: the Backend's waiting fetches run no
// script for it until a wake-up on its channel, the earliest due time or lease end its
// script reported, or Options.IdleRecheck (30 s by default; from three quarters of it on, a
// recheck rides along with any other claim round trip) has passed. An idle node therefore sends no command per queue per poll wait:
// 1,000 idle queues cost about 1,000 claim scripts (six commands each) per IdleRecheck,
// about 200 commands/s, instead of two scripts per queue per poll wait (12,000 commands/s at
// the 1 s default). The rest is each Backend's own knowledge, not a shared index key: a key
// naming the queues with due work would be one more write on every publish, could not be
// written by the per-queue scripts on Redis Cluster (another slot), and could go stale;
// what a rest can miss (a lost Pub/Sub message) the recheck bounds.
//
// # Claims and settles
//
// Settles and extensions from concurrent workers are group-committed (batch.go): a call
// queues its settle and waits for its own reply; a few flushers each take every settle queued
// at that moment and send them in one pipeline, with one settle script call per queue
// carrying all of that queue's settles (each checked and answered on its own). No timer is
// involved, so a lone Ack still costs one round trip, while under load one round trip and one
// script call carry many: with one message per batch this is what keeps Redis from spending
// its time on per-call overhead. Inside a script, each kind of change is one variadic command
// over all the batches the call moves (ZREM, ZADD, HMGET, HSET, HDEL; ZMSCORE for the lease
// ends), so claiming or settling n batches costs the server a fixed number of commands, not a
// few per batch.
//
// Claim.Deliveries counts handouts since the batch was stored or last rewritten; Retry
// rewrites (the new body is stored and Deliveries restarts at 0). A settle or extension with a
// stale token, or after the lease ended, returns an error wrapping core.ErrLeaseLost; settling
// a claim twice is a no-op. Publishing a batch id that is already stored is a no-op, so a
// publish retried after a lost reply cannot reset a batch in flight. Fetch runs its claim
// round trip detached from ctx, so a claim Redis made is always returned.
//
// # Errors
//
// errors.go classifies go-redis errors in one place: a refused, reset or closed connection, an
// i/o or dial timeout, a pool timeout, and the LOADING, READONLY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN, BUSY and NOREPLICAS replies and unfollowed MOVED/ASK redirections (redirect
// storms) wrap core.ErrBackendUnavailable; the rest (WRONGTYPE, NOAUTH, OOM, ...) do not.
package redis
