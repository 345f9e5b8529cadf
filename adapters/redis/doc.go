// Package redis is the txmq backend on Redis (github.com/redis/go-redis/v9), for apps that
// outgrow their own database as a queue. It means exactly what the sqljobs and memory backends
// mean by every queue setting; the parity suite (package parity) proves it against a real
// server, and against a Redis Cluster. Import it for its redis://, rediss://, redis+cluster://
// and rediss+cluster:// URL schemes, or call New. It is a module of its own (go get
// github.com/txmq/txmq/adapters/redis), so only apps that use it require go-redis:
//
//	be, err := redis.New(&redis.Options{Addr: "127.0.0.1:6379", Prefix: "myapp"})
//	node, err := txmq.NewNode(be, nil)
//
//	TXMQ_BACKEND=redis://:secret@10.0.0.5:6379/0?txmq_prefix=myapp
//	TXMQ_BACKEND=redis+cluster://:secret@10.0.0.5:7000,10.0.0.6:7000,10.0.0.7:7000/?txmq_prefix=myapp
//
// # URL and parameters
//
// Importing the package registers the redis:// and rediss:// (TLS) schemes for one server, and
// redis+cluster:// and rediss+cluster:// for a Redis Cluster:
//
//	redis://[[user]:password@]host[:port][/db][?param=value...]
//	rediss://...   the same over TLS
//	redis+cluster://[[user]:password@]host1:port1,host2:port2,...[/][?param=value...]
//	rediss+cluster://...   the same over TLS
//
// The connection part and the go-redis query parameters (dial_timeout, read_timeout, pool_size,
// max_retries, skip_verify, ...) are read by goredis.ParseURL (goredis.ParseClusterURL for a
// cluster: max_redirects, route_by_latency, ... too). A cluster URL lists some or all of the
// cluster's nodes, separated by commas (one is enough: the client discovers the others; list
// several so that opening survives one being down); its path may only be / or /0 (a cluster has
// database 0 only). Options.ClusterAddrs is the same in code. Parameters starting with txmq_
// (the scheme of every adapter) set Options:
//
//	txmq_prefix        Options.Prefix
//	txmq_lease         Options.DefaultLease (a Go duration)
//	txmq_fetch_limit   Options.FetchLimit
//	txmq_call_timeout  Options.CallTimeout (a Go duration)
//	txmq_idle_recheck  Options.IdleRecheck (a Go duration)
//	txmq_goredis_logs  Options.GoRedisLogs (a Go bool)
//
// Any other txmq_ parameter is an error wrapping core.ErrInvalidConfig that lists the accepted
// ones. Errors never contain the password. Open does no I/O.
//
// # Delivery semantics
//
// Each queue has four keys (four more for ordered queues, see "Ordering"), all under the hash
// tag {prefix:queue}:
//
//	{txmq:emails}:due    ZSET  batch id -> due time (ms, server clock): ready when due <= now
//	{txmq:emails}:body   HASH  batch id -> encoded envelope (opaque bytes)
//	{txmq:emails}:lease  ZSET  batch id -> lease end (ms, server clock): the batches in flight
//	{txmq:emails}:dlv    HASH  batch id -> handouts since stored or rewritten (Deliveries),
//	                           while leased with the lease token appended ("3:<token base>")
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
//   - A lease token per handout (the dlv value while leased, carried in Claim.Handle) tells
//     the current holder from a node whose lease ran out: its settles and extensions fail
//     with core.ErrLeaseLost and change nothing. It shares the Deliveries entry the claim
//     writes anyway, so a handout and a settle write one hash entry, not two.
//   - Exclusive needs no separate lock key: the claim script of an Exclusive queue claims one
//     batch, and none while the lease set holds a live lease. A lock key with a PX expiry
//     would be a second record of the same fact that could disagree with the lease set (key
//     expiry and script time are different clocks); the lease set is released by every
//     settle and by lease expiry by construction.
//   - A cluster-wide limit (txmq.QueueConfig.ClusterLimit, core.ClusterLimiter) is the same
//     record counted: the claim script claims at most the limit minus the queue's live
//     leases (clusterlimit.go); KeyLimit counts the live leases of each fairness key.
//   - Fair share by key (txmq.QueueConfig.Fair, core.FairSharer and core.FairPrioritizer):
//     the due set stays the record of every unclaimed batch; a fair queue mirrors it into one
//     sorted set per fairness key and keeps a ring of the keys with unclaimed batches, scored
//     by turn, all under the queue's hash tag (fair.go). The claim takes the best ready batch
//     of each key in turn (due time minus lead within the key, so Fair and Prioritized
//     combine), and every script that puts a batch back in the due set (retry, expired lease,
//     an ordering key's next head, an edit) puts it back in its key's turn.
//   - Hash tags keep one queue's keys in one Redis Cluster slot, so every script is legal on
//     a cluster, and Fetch pipelines one script per queue in a single round trip (on a
//     cluster, go-redis splits the pipeline per master and sends the parts in parallel: one
//     round trip per master holding one of the queues, never one per queue). No key is
//     global: nothing a script touches lies outside its queue's slot, and no command scans
//     the key space.
//
// Times are the server's (redis.call('TIME') inside the scripts), so nodes with skewed clocks
// agree on due times and lease ends; clients send only durations, rounded up to the
// millisecond, so nothing is ever due early.
//
// A Fetch that finds nothing waits on the wake channels of its queues, which the publish and
// retry scripts (and settles of Exclusive batches) PUBLISH to in the same script. A publish
// sends its wake-up only when the queue had no ready batch: a fetch waits on a queue only after
// its claim found nothing ready there, so a queue with a backlog costs no PUBLISH (and no
// wake-up on every subscribed node) per batch. One Pub/Sub connection per Backend serves every
// waiting Fetch, so an idle node costs one idle connection and picks up new work within
// milliseconds; the wait also ends at the earliest due time or lease end the claim scripts
// reported, at Wait, or when ctx is cancelled.
//
// Claim.Deliveries counts handouts since the batch was stored or last rewritten; Retry rewrites
// (the new body is stored and Deliveries restarts at 0). A settle or extension with a stale
// token, or after the lease ended, returns an error wrapping core.ErrLeaseLost; settling a
// claim twice is a no-op. Publishing a batch id that is already stored is a no-op, so a publish
// retried after a lost reply cannot reset a batch in flight. Fetch runs its claim round trip
// detached from ctx, so a claim Redis made is always returned.
//
// Caller ids deduplicate (core.IDDeduper, txmq.QueueConfig.IDDedupWindow) exactly, with any
// window, per message id: a batch asking for it is published by one script that checks and
// records its ids in the queue's id set, {txmq:emails}:ids (ZSET id -> expiry, ms, server
// clock), in the same atomic step that stores the batch. An id held there is refused (the
// script stores nothing and names it) until the window from its first publish has passed on
// the server's clock. The guarantee is as durable as Redis's own data: a Redis restarted
// without persistence forgets the ids with the batches, and an asynchronous replica promoted
// after a failover may miss the last ones (see below).
//
// Unique keys (core.UniqueKeeper, txmq.QueueConfig.Unique) work in every mode: a unique batch is
// published by a script of its own that reads the key's holder in the queue's key hash,
// {txmq:emails}:uniq (key -> holder batch id, window end, SHA-1 of the body it was stored with),
// judges it from the queue's own state (body stored; handed out; rewritten), removes a
// debounce's unstarted holder and moves the key in the step that stores the batch; past 64
// keys, one call in 16 prunes stale entries. As durable as Redis's data (see below).
//
// On a Redis Cluster, queues spread over the cluster's slots by their hash tag {prefix:queue}; each queue lives on
// one master (and its replicas), so one queue's throughput is bound by one master, and many
// queues use them all. Wake-ups are plain PUBLISH, which a cluster broadcasts to every node, so
// each Backend's one subscription (on whichever node go-redis picks) hears every queue. The
// client follows MOVED and ASK redirections (slot migrations) and failovers by itself; while
// a slot has no master, calls on its queues fail with errors wrapping core.ErrBackendUnavailable
// (CLUSTERDOWN, a refused connection), which the engine retries.
//
// Redis replicates asynchronously: a master that dies may take with it writes it acknowledged
// but had not yet sent to its replicas, and the replica promoted in its place does not have
// them. For txmq that means a published batch lost, or a settle or lease extension undone (the
// batch is delivered again, or, its lease forgotten, an Exclusive batch may run beside another
// for a moment). Remedies: the WAIT command after each write (WAIT 1 <ms> makes the write
// wait until one replica has it), which txmq does not send today; appendonly yes with
// appendfsync always on every node, which keeps what a node acknowledged across its own restart
// but not across a failover to a replica; and ledger mode (package ledger, Options.Mode),
// which keeps every batch in the app database until its settle is recorded and publishes
// again what was not settled within its horizon. The
// chaos suite's redis-cluster/kill-master scenario measures the loss.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches with a key
// (txmq.QueueConfig.Ordered). The batches of one key form a linked list in four more hashes
// of the queue, all under its hash tag (so scripts stay single-slot and declare every key they
// touch):
//
//	{txmq:ledger}:ktail  HASH  key -> the key's last stored batch id
//	{txmq:ledger}:knext  HASH  batch id -> the next batch id of its key
//	{txmq:ledger}:bkey   HASH  batch id -> its key
//	{txmq:ledger}:hdue   HASH  held batch id -> its due time (ms, server clock)
//
// Only a key's first batch is ever in the due or lease set: the publish script appends a batch
// behind its key's tail without putting it in the due set (held, counted as delayed), and the
// ack or drop of the first batch makes the next one due (at its own due time, or at once) in
// the same script, with a wake-up. A retry or an expired lease puts the first batch back in
// the due set, still first, so the lease of a key's first batch is the per-key lease. Claims
// are unchanged.
//
// Cost: a keyed publish is the same one script call plus three HSETs (four when held); an
// ack or drop of a keyed batch adds four to six hash commands inside the settle script (a
// settle call of an unordered queue adds one EXISTS); memory is four hash fields per stored
// keyed batch. HoldsKey (core.KeyHolder, asked by a drain wrapper of its old backend) is one
// HEXISTS on ktail.
//
// # Limits
//
// A batch travels as one bulk argument, so its body is at most the server's proto-max-bulk-len
// (512 MB by default): the Backend implements core.SizeLimiter with Options.MaxBatchBytes, or
// with the server's value read by CONFIG GET at the first publish (and again when a large
// publish fails on the network; 512 MB until then, or when CONFIG is not allowed). A larger
// batch is refused before it is sent, with an error wrapping core.ErrRejected. Options.Prefix
// must not contain '{' or '}' (it goes inside the keys' hash tag). Delays have no cap. One
// Fetch hands out at most Options.FetchLimit claims (default 1000) across its Unlimited queues
// when the request's Max is 0; each claim pipeline is bounded by Options.CallTimeout (default
// 10 s).
//
// Durability: the adapter stores what Redis acknowledged, and Redis keeps only what its persistence
// settings keep. A Redis restarted without persistence (no AOF, or an RDB snapshot older than
// the crash) has forgotten every batch it held: queued, delayed and in flight, leases included
// (a forgotten lease can also let two Exclusive runs overlap). Measured (issue 16): 299 of 2,065 committed
// messages lost in one steady-publishing run, exactly Redis's backlog at the restart; the chaos
// suite's redis/restart-backend-noaof scenario shows the same (docs/reliability.md). Remedies:
//
//   - run Redis with an append-only file, appendonly yes and appendfsync always (nothing
//     acknowledged is lost to a crash of the server or the machine), or appendfsync everysec
//     (about a second of writes at risk);
//   - replicate it (a replica promoted by Sentinel loses what was not replicated yet);
//   - the txmq ledger (txmq.Config.Ledger) records every message's publish and outcome in the
//     app database, so what was lost can be found (messages left queued or running long after
//     their time, txmq msg ls --state queued --until 10m), and ledger mode (ledger.Options.Mode)
//     publishes it again once it is not settled within the horizon: the chaos scenario
//     redis/restart-backend-noaof-ledger misses 0 where the same restart without it misses ~50.
//
// # Errors
//
// errors.go classifies go-redis errors in one place: a refused, reset or closed connection, an
// i/o or dial timeout, a pool timeout, and the LOADING, READONLY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN, BUSY and NOREPLICAS replies and unfollowed MOVED/ASK redirections (redirect
// storms) wrap core.ErrBackendUnavailable; the rest (WRONGTYPE, NOAUTH, OOM, ...) do not.
//
// A client closed by Close gives errors wrapping core.ErrClosed; a refusal the server would
// repeat forever (a batch over proto-max-bulk-len) wraps core.ErrRejected and is not retried; a
// stale lease token wraps core.ErrLeaseLost. With Options.GoRedisLogs, go-redis's own log lines
// for the same failures go to Options.Logger at Debug level instead of stderr.
//
// # Cost
//
// Id dedup: batches without caller ids run the plain publish script, untouched. A batch with
// them adds, in its one script, a ZREMRANGEBYSCORE of the expired ids, one ZSCORE per id and
// one variadic ZADD; the id set holds each id for its window (the set itself expires one
// window after its last write).
//
// Settles and extensions from concurrent workers are group-committed (batch.go): a call queues
// its settle and waits for its own reply; a few flushers each take every settle queued at that
// moment and send them in one pipeline, with one settle script call per queue carrying all of
// that queue's settles (each checked and answered on its own). No timer is involved, so a lone
// Ack still costs one round trip, while under load one round trip and one script call carry
// many: with one message per batch this is what keeps Redis from spending its time on per-call
// overhead. Inside a script, each kind of change is one variadic command over all the batches
// the call moves (ZREM, ZADD, HMGET, HSET, HDEL), so claiming or settling n batches costs the
// server a fixed number of commands, not a few per batch. Per batch, a claim moves it from the
// due set to the lease set and reads its body and writes its dlv entry (Deliveries and lease
// token in one value); an ack reads that entry and deletes the batch's three entries (an ack
// is sent as id, token and op alone). The lease ends are read only when some lease of the
// queue has ended, and no number is formatted per batch (Redis formats each number a script
// passes to a command with snprintf, which costs more than the command itself).
//
// What an idle node costs: a queue whose claim script found nothing rests. The Backend's
// waiting fetches run no script for it until a wake-up on its channel, the earliest due time or
// lease end its script reported, or Options.IdleRecheck (30 s by default; from three quarters
// of it on, a recheck rides along with any other claim round trip) has passed. An idle node
// therefore sends no command per queue per poll wait, and holds one idle Pub/Sub connection:
// 1,000 idle queues cost about 1,000 claim scripts (six commands each) per IdleRecheck, about
// 200 commands/s, instead of two scripts per queue per poll wait (12,000 commands/s at the 1 s
// default). The rest is each Backend's own knowledge, not a shared index key: a key naming the
// queues with due work would be one more write on every publish, could not be written by the
// per-queue scripts on Redis Cluster (another slot), and could go stale; what a rest can miss
// (a lost Pub/Sub message) the recheck bounds.
//
// Pub/Sub rather than BLPOP on per-queue signal lists, because: BLPOP holds one pooled
// connection per waiting Fetch and cannot be interrupted by ctx (only by its own timeout, or by
// closing the connection); BLPOP over several queues' keys is illegal on a cluster (they live
// in different slots); and a signal list needs trimming or it grows while nobody waits. The
// cost is that Pub/Sub is not durable: a wake-up sent while the subscription reconnects is
// lost. Every break of the subscription ends the rest of every queue (see above) and stops the
// skipping until the server confirms the channel again; a wake-up lost without a break (which
// Redis does not do on a live connection) delays a pickup by at most Options.IdleRecheck. On a
// cluster, PUBLISH is broadcast to every node, so one subscription on any node hears every
// queue.
package redis
