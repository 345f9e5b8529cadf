// Package nats is the txmq backend on NATS JetStream (github.com/nats-io/nats.go). It needs
// nats-server 2.12 or later (message schedules); it is tested against v2.15. It is a module of
// its own (go get github.com/txmq/txmq/adapters/nats), so only apps that use it require
// nats.go; the embedded server of its tests (package natstest) stays in this module.
//
//	be, err := nats.New("nats://127.0.0.1:4222", &nats.Options{Prefix: "app"})
//	node, err := txmq.NewNode(be, nil)
//
// or, with the package imported, TXMQ_BACKEND=nats://127.0.0.1:4222?txmq_prefix=app (see Open).
//
// # URL and parameters
//
// Importing the package registers the nats:// scheme:
//
//	nats://[user:password@]host:port[?txmq_prefix=app&txmq_replicas=3&...]
//
// The host (and user info, passed to the server as credentials and never logged) names the
// server to dial. A cluster is named by comma-separated hosts, each with a port or all without
// (then 4222), the user info applying to each: nats://a:4222,b:4222,c:4222?txmq_replicas=3
// dials any of the three and replicates every stream and consumer on three servers
// (TestClusterURL checks it on a 3-node v2.15 cluster, and parity[nats-cluster] runs the whole
// parity suite on one through such a URL). Query parameters follow the scheme of every
// adapter, txmq_<name>, and set Options:
//
//	txmq_servers         more servers to dial, comma separated (nats://b:4222,nats://c:4222)
//	txmq_prefix          Options.Prefix
//	txmq_replicas        Options.Replicas
//	txmq_storage         Options.MemoryStorage (file or memory)
//	txmq_max_age         Options.MaxAge (a Go duration)
//	txmq_ack_wait        Options.AckWait (a Go duration)
//	txmq_timeout         Options.Timeout (a Go duration)
//	txmq_idle_pull       Options.IdlePull (a Go duration)
//	txmq_max_ack_pending Options.MaxAckPending
//	txmq_partitions      Options.Partitions (key partitions of an Ordered queue, see Ordering)
//	txmq_fetch_limit     Options.FetchLimit
//	txmq_name            Options.Name
//	txmq_creds           Options.CredentialsFile (a .creds file)
//	txmq_nkey            Options.NKeySeedFile (an NKey seed file)
//	txmq_tls_ca          Options.RootCAFiles (a PEM file)
//	txmq_tls_cert        Options.ClientCertFile (a PEM file)
//	txmq_tls_key         Options.ClientKeyFile (a PEM file)
//
// Any other parameter is an error wrapping core.ErrInvalidConfig that lists the accepted ones.
//
// # Delivery semantics
//
// Queue q lives in the stream "<prefix>_<q>" with work-queue retention, on the subjects
//
//	<prefix>.<q>.r             due batches: the consumer's filter
//	<prefix>.<q>.s.<id>        message schedules (delayed publishes and retries)
//	<prefix>.<q>.c.<id>.<n>    chunks of bodies larger than the server's max payload
//	<prefix>.<q>.k.<n>         keyed batches of key partition n (see Ordering)
//	<prefix>.<q>.n.<seq>       deliveries of a keyed batch that were not runs (see Ordering)
//
// A stream per queue (rather than one stream with a subject per queue) gives each queue its own
// limits, storage and replicas, a cheap per-queue depth, and failure isolation: a full or slow
// queue never holds the others back, and deleting a queue is deleting a stream. The cost is one
// stream (and, in a cluster, one Raft group) per queue, fine for the tens to hundreds of queues
// an app declares. Streams are created on first use with the Options' replicas, storage and max
// age; existing streams are used as they are. A client's first use of a queue is one create
// call, which answers with the existing stream when its config is the same, and a lookup only
// when it differs; consumers likewise. A create rather than a lookup first, because in a
// cluster nats-server serves info requests only when no other API request is queued, and a
// lookup racing other nodes' creations could outlast Options.Timeout.
//
// Claims and leases: each queue has one durable pull consumer, "txmq", shared by every node, so
// the server load-balances batches between them: explicit acks, AckWait = the lease, MaxDeliver
// unlimited (the engine owns the retry budget, and dead-letters a batch whose nodes keep dying), no
// BackOff. Claim.Deliveries is the message's NumDelivered plus its Txmq-Base header (see
// "deliveries that are not runs" below). AckWait is one per consumer, so nodes with different
// leases share it: it is the longest lease (or Options.AckWait) any client asked for, raised by
// a client whose lease is longer and never lowered (a lower AckWait would cut the leases other
// clients hold and time by the value they saw). Claim.LeaseUntil and Extend report the AckWait
// this client last saw, which is never more than the server's, so every node's claims hold at
// least its own lease and the engine extends them in time. A node with a shorter lease only loses
// crash-recovery speed: its dead claims come back after the longer AckWait. To lower AckWait,
// edit or delete the consumer while no node runs. (Two clients raising it to different values
// at the same moment may leave the lower one; a stale cached value is refreshed only when this
// client's own lease needs more.)
//
// Extend sends +WPI (work in progress) and waits for the server's reply. JetStream accepts an
// ack for a redelivered message from its previous holder (acks are keyed by stream sequence),
// so the Backend tracks each lease itself: the deadline is timed from before the pull request
// (the server starts AckWait later, on delivery), and a settle or extension after it, or within
// Options.LeaseMargin of it, returns core.ErrLeaseLost without touching the server. The
// residual risk is an ack sent in time that reaches the server after its AckWait ran out (a
// network stall longer than the margin): the server may then have redelivered the batch while
// accepting the old holder's ack, and the new run's settle is a no-op on the server. That is a
// duplicate run, as at-least-once allows, never a loss. Drop, Retry and Extend are requests
// the server answers ("double acks"), so a nil error means the server applied them. An Ack is
// a plain +ACK: the Acks of the moment are published together by one goroutine, and each
// returns once a PING/PONG round trip after them confirms that the server read them; an Ack's
// lease and connection are checked again right before its +ACK leaves (it may wait for the
// round trip in flight), and one that ran out meanwhile returns core.ErrLeaseLost unsent.
// Settling a settled claim again is a no-op.
//
// A claim pulled before the connection was re-established is lost too: a server restarted from
// its store (or a failover) may hand out again what it had delivered, while accepting the old
// holder's +WPI. So after a reconnect, every claim pulled earlier answers Extend and settles
// with core.ErrLeaseLost (the engine then stops its listener), and messages stashed before it
// are not handed out. The price: a network blip re-runs what was in flight then.
//
// Deliveries that are not runs: the engine counts a run as the envelope's attempt plus
// Claim.Deliveries, and a run is counted only when a listener ran. The server counts every
// delivery, including those this client received and never handed to a node: a pulled message
// waiting in the stash while the queue's slots are full, and one left when the Backend closes.
// (A batch the engine itself receives too early is given back by it, see
// txmq.NodeOptions.MaxClockSkew.) NumDelivered cannot be lowered, so such a message is given
// back as a copy: the same headers and data (the batch id, a large body's chunk references; the
// body is not decoded) are stored again with Txmq-Base = the deliveries so far minus this one,
// and only then is the delivered message acknowledged; the copy's Deliveries is Txmq-Base plus
// its own NumDelivered. The count lives in the stored message, so it holds across nodes and
// process restarts. A stashed message is given back when half its lease is gone if no Fetch
// took it (a timer, not the next Fetch, since a node at capacity does not fetch the queue), or
// by Close. Close waits for outstanding pulls to end on their own rather than cutting them (the
// client would drop what the server already sent), which bounds Close by a pull's wait (the
// Fetch's Wait, at most a quarter of AckWait). Still counted: a delivery whose lease is within
// the margin of its end (it may already run elsewhere), one held by a process that died, and
// one whose copy cannot be stored (an outage; it is then given back with a Nak, logged). If the
// acknowledgement fails after the copy was stored, the batch runs twice, never zero times.
//
// Exclusive queues: an Exclusive queue's consumer has MaxAckPending 1: the server itself never
// has more than one unacknowledged batch of the queue, whichever node pulls, so exclusivity
// holds across every client of the consumer with no lock service. It is released by the ack of
// a settle, a retry (the rewrite acks the old message), a drop (+TERM) and AckWait expiry. The
// guarantee is per consumer: a second consumer on the same stream (another Prefix-compatible
// tool, or a consumer created by hand) would not share the limit, and work-queue streams refuse
// overlapping consumers anyway.
//
// A Fetch asks, per requested queue, for up to its free slots (at most the request's Max),
// with one pull request that waits up to req.Wait (capped at a
// quarter of the lease). The server answers as soon as messages arrive, so a waiting Fetch
// wakes at once; it returns when it can hand out at least one claim. A pull that outlives its
// Fetch keeps filling a per-queue stash that the next Fetch empties first, so a claim is never
// stranded by an early return or a cancelled ctx. While pulls are outstanding, a Fetch whose
// free slots exceed what they still wait for sends one more pull for the difference, up to four
// per queue per Backend (one per key partition): the slots freed while a pull travels are
// asked for at once, never more than the free slots in all. The Backend sends its pull
// requests itself and reads what they deliver in the goroutine that sent them, the way
// jetstream's Fetch reads them (status messages included), without Fetch's goroutine per
// pull in between.
//
// Delays, retries, never early: a batch due later is published as a JetStream message schedule
// ("Nats-Schedule: @at <time>", nats-server 2.12+) on its own subject, targeting the queue's
// ready subject: the server stores it and publishes the batch when due, with no cap on the
// delay. The time is on the server's clock, the one the schedule fires by: the batch's delay
// (never the publisher's absolute due time) added to the server's time read from a stream info
// at most 30 s before and advanced by this process's monotonic clock, so app/server clock skew
// cannot make a batch early, and the estimate's error (one round trip) can only make it that
// much late. A delivered batch is not compared with this process's clock again.
//
// Retry is a rewrite: the body the engine re-encoded (with its attempt count) is stored again
// (scheduled when delayed) and only then is the old message acked, so Deliveries restarts at 1,
// the Exclusive slot is released during the backoff, and Depths shows the retry as delayed.
// A keyed batch is the exception: retried in place (see Ordering), so a claim the engine gives back
// unrun (a paused queue, a closing node, an early arrival) counts as a delivery there.
//
// Caller ids deduplicate (core.IDDeduper, txmq.QueueConfig.IDDedupWindow) with JetStream's own
// message deduplication: JetStream deduplicates whole messages, so the engine gives each message
// with a caller id a batch of its own (core.DedupSupport.OnePerBatch), stored with
// Nats-Msg-Id = the id; a publish the server reports as a duplicate stores nothing (chunks of
// a large body are purged) and is left out by the engine. The window is a stream setting
// (Duplicates), and a queue is one stream: the first such publish of a Backend sets the
// queue's stream's Duplicates to the queue's IDDedupWindow (nodes must declare the same
// window; the last one set wins). It is exact while the server keeps its dedup state, which it
// holds in memory and rebuilds on restart from the messages still stored: after a server
// restart, ids of batches already acked (removed by work-queue retention) are forgotten.
//
// Unique queues (txmq.QueueConfig.Unique) are refused at NewNode, naming the queue and the
// mode: the Backend does not implement core.UniqueKeeper (a stream keeps no state a publish
// could judge an earlier batch by; the duplicate window is one fixed window per stream).
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches with a key
// (txmq.QueueConfig.Ordered) with key partitions. A keyed batch is stored on one of its
// stream's partition subjects, <prefix>.<q>.k.<n>, n = FNV-1a(key) mod the stream's
// partitions (Options.Partitions, txmq_partitions, default 8; recorded in the stream's
// metadata when the stream is made, and read from there by every client, so clients with other
// settings still agree). Each partition has its own durable pull consumer, "txmq-k<n>", with
// MaxAckPending 1: the server hands out a partition's batches one at a time in stream order,
// and the one it handed out stays pending, holding the partition, until it is acked or
// terminated. So at most one batch per key is in flight cluster-wide, in publish order.
// Nodes pull the partitions of a queue whose QueueSlots.Ordered is set, besides its main
// consumer (unkeyed batches). An Exclusive Ordered queue keeps its keyed batches on the
// ready subject, under its main consumer's MaxAckPending 1: one total order, which keeps every
// key's.
//
// Why partitions: JetStream has no per-subject in-flight limit, so the choices were a consumer
// per key (unbounded consumers, a pull per key per Fetch), a subject per key with a lock and a
// "held" list kept by the client (a second store to keep consistent with the stream across
// crashes), or a bounded number of consumers that the server itself keeps to one in flight.
// The last needs no client-side state for correctness: retries, lost leases and delays are all
// the server's own redelivery of the one pending message.
//
//   - Head of line: a keyed batch is retried in place: Retry sends a Nak with the backoff as its
//     delay ("-NAK {delay}"), the stored body is kept and Deliveries counts on (the engine counts
//     the run from the envelope's attempt plus Deliveries). It stays the partition's pending batch
//     through its backoff, so its key (and its partition) waits until it is acked or dropped.
//   - A lost lease is the server's own redelivery after AckWait, of the same pending batch,
//     before anything later in its partition.
//   - Delays: a delayed keyed batch is stored at once in its place, with its delay in the
//     Txmq-Delay header (not as a message schedule, which would let later batches of its key
//     pass it). Delivered before it is due, judged on the server's clock (its store time plus
//     the delay, against a lower bound of the server's clock now, so never early), it is not
//     handed out but hidden with a Nak delayed by what is left: it stays pending and holds its
//     partition until it is due and done.
//   - Deliveries that are not runs: a keyed batch cannot be given back as a copy (the copy would
//     go behind the later batches of its key), so a stashed one is given back in place with a
//     Nak, and an early one is hidden in place. Each such delivery, and one whose lease ran out
//     in the stash, is recorded as not a run in a rollup message on <prefix>.<q>.n.<stream
//     seq> (the count so far), read when the batch is delivered again; Claim.Deliveries is
//     NumDelivered less that count. The count is removed with the batch. If recording fails
//     the delivery counts (logged).
//   - Leases: a partition pull may carry the partition's batches one after another (each is
//     delivered only once the one before is settled), so a batch's lease is timed from the
//     later of the pull's start and this Backend's last settle on that partition, both before
//     the server's delivery.
//   - Restarts: the partition consumers keep their state in server memory (the stream stays on
//     disk): with one batch in flight per partition, consumer state changes on every batch, and
//     under load file-backed state made each partition several times slower. After a server
//     restart the consumers are gone; the next Fetch makes them again (a pull that finds no
//     consumer drops it from the cache), and they start from the partition's first stored
//     batch, still in order. What is lost: a pending in-place retry's backoff (the batch runs
//     again at once) and its delivery count, so a failing batch may get more runs than its
//     budget across restarts (never fewer); claims pulled before the restart are lost anyway
//     (see connEpoch above).
//   - Cost of sharing: keys that hash to the same partition wait on each other (head of line
//     across keys): a failing, slow or delayed batch holds back every key of its partition,
//     not only its own, and at most Partitions keys of a queue run at once cluster-wide. Two
//     given keys share a partition with probability 1/Partitions; raise it for more
//     parallelism, at the cost below. The partitions of an existing stream cannot change (the
//     metadata wins): a new count needs a new queue, or a drained stream deleted.
//
// # Limits
//
// The server must be nats-server 2.12 or later (message schedules). A body larger than the
// server's max_payload is chunked (below), so the Backend does not implement core.SizeLimiter;
// a message the server still refuses (over the stream's max_msg_size) is an error wrapping
// core.ErrRejected. Delays have no cap. A queue name must match ^[a-z][a-z0-9_-]{0,63}$;
// Options.Prefix is 1 to 32 letters, digits, '-' or '_'; Replicas is 1 to 5. One stream per
// queue suits the tens to hundreds of queues an app declares. One Fetch hands out at most
// Options.FetchLimit claims (default 100) across its Unlimited queues when the request's Max is
// 0, and a non-exclusive queue has at most Options.MaxAckPending (default 10000) claimed
// batches across all nodes. Options.MaxAge, when set, discards batches older than that,
// whatever their state, without a dead letter. Depths leaves core.Depth.OldestReady zero: the
// stream's consumer info does not tell the oldest pending batch's time without reading it.
//
// Large bodies: a body larger than the server's max_payload (minus 8 KiB for headers;
// Options.ChunkSize) is stored as chunk messages on the queue's chunk subjects, then a small
// reference message; a fetch reassembles it (direct gets) and the settle removes the chunks.
// Chunks are written before the reference, so a reader never sees a partial body; a failed
// publish removes the chunks it wrote, best effort.
//
// # Errors
//
// The connection reconnects forever and does not buffer while disconnected, so a call made
// during an outage waits for a reconnect up to Options.Timeout and then fails with an error
// wrapping core.ErrBackendUnavailable (errors.go classifies every nats.go and JetStream error
// in one place). Stored batches and consumers live on the server and survive its restart with
// file storage.
//
// A publish that the server certainly did not store (no responder: the stream's leader is
// being elected; or a 503: JetStream briefly unavailable) is sent again with backoff (25 ms
// doubling to 400 ms) for up to Options.Timeout, and a queue's stream setup and duplicate
// window update, which are idempotent, are sent again on any outage for up to twice
// Options.Timeout, both within the
// caller's deadline (busy.go). A publish that timed out is not sent again: it may be stored.
// So a node without an outbox rides out a leader election rather than dropping the batch.
//
// In a cluster, a pull that finds no responder (the consumer's leader was just elected, by its
// creation or a failover, and the other servers have not yet learnt its subscription) or that
// its leader ends with a leadership change is sent again after 50 ms, for up to Options.Timeout
// in a row, before Fetch reports the error; the first no-responder of such a run looks the
// consumer up again, creating it if it is gone (a key partition's after a server restart). This
// holds for every lane: a queue's main consumer and each key partition's. A Fetch sets up the
// streams, then the consumers (main and partitions), of the queues it has not used yet
// concurrently, four calls at a time (each waits for its Raft group's leader). A stream or
// consumer that cannot be placed because a server is offline ("no suitable peers for
// placement, peer offline") wraps core.ErrBackendUnavailable; with more replicas than servers
// it is a configuration error.
//
// A settle or extension after the lease (or within Options.LeaseMargin of its end), or of a
// claim pulled before a reconnect, wraps core.ErrLeaseLost. A bad Options field or URL
// parameter, an empty or non-portable queue name, or a claim this Backend did not hand out
// wraps core.ErrInvalidConfig.
//
// # Cost
//
// Id dedup: batches without caller ids are published as before. Messages with caller ids
// cost one JetStream message each (no batching: a listener receives them one per call), and
// the server keeps one dedup entry per id for the window; the first dedup publish of a
// Backend reads the stream's info (and updates the stream once when its window differs).
//
// A queue whose last pull delivered nothing is idle: its next pull waits Options.IdlePull (30 s
// by default; never less than req.Wait, never more than a quarter of the AckWait), outliving
// the Fetch calls that join it, and a publish still reaches it at once. An idle queue thus
// costs one pull request (and the server's timeout status) per node per min(IdlePull,
// AckWait/4): 480 an hour at the default 30 s lease (measured; 3,600 at PollWait 1 s when pulls
// ended with each Fetch), no server-side state beyond the waiting request, and nothing while a
// node is at capacity. A pull whose client went away is not delivered to: the server checks the
// reply subject's interest first. Close waits for outstanding pulls (see above), so it can take
// up to a quarter of the AckWait.
//
// An Ordered queue adds Partitions consumers to its stream (made four at a time on a node's
// first Fetch of it) and one pull per partition: an idle Ordered queue costs Partitions+1 pull
// requests per node per min(IdlePull, AckWait/4) instead of one. Each partition has one batch
// in flight, so a busy partition costs a pull round trip and a settle per batch when its next
// batch is not already waiting in an open pull; a Fetch sends at most one pull per lane, so
// Partitions+1 requests at most. A delayed keyed batch delivered early costs a stream info
// (the server's clock, cached 30 s), a count message and a Nak; a batch given back costs a
// count message and a Nak; a keyed batch delivered more than once costs a direct get (its
// count) and, at its settle, a purge. Depths lists the stream's consumers in one call; while
// its own client is creating the queue's stream or consumers it waits for that first (a
// listing in a cluster waits for every consumer's leader), within one call's Options.Timeout.
//
// A stream per queue costs one stream (and, in a cluster, one Raft group) per queue. Extend and
// every settle are requests the server answers: one round trip each. A delayed publish or retry
// is one scheduled message; a chunked body costs one message per chunk plus the reference, and
// direct gets to read it back.
package nats
