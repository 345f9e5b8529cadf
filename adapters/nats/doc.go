// Package nats is the txmq backend on NATS JetStream (github.com/nats-io/nats.go). It needs
// nats-server 2.12 or later (message schedules); it is tested against v2.15.
//
//	be, err := nats.New("nats://127.0.0.1:4222", &nats.Options{Prefix: "app"})
//	node, err := core.NewNode(&core.NodeOptions{Backend: be})
//
// or, with the package imported, TXMQ_BACKEND=nats://127.0.0.1:4222?txmq_prefix=app (see Open).
//
// # Layout: one stream per queue
//
// Queue q lives in the stream "<prefix>_<q>" with work-queue retention, on the subjects
//
//	<prefix>.<q>.r             due batches: the consumer's filter
//	<prefix>.<q>.s.<id>        message schedules (delayed publishes and retries)
//	<prefix>.<q>.c.<id>.<n>    chunks of bodies larger than the server's max payload
//
// A stream per queue (rather than one stream with a subject per queue) gives each queue its
// own limits, storage and replicas, a cheap per-queue depth, and failure isolation: a full or
// slow queue never holds the others back, and deleting a queue is deleting a stream. The cost
// is one stream (and, in a cluster, one Raft group) per queue, fine for the tens to hundreds
// of queues an app declares. Streams are created on first use with the Options' replicas,
// storage and max age; existing streams are used as they are.
//
// # Claims and leases
//
// Each queue has one durable pull consumer, "txmq", shared by every node, so the server
// load-balances batches between them: explicit acks, AckWait = the lease, MaxDeliver
// unlimited (core owns the retry budget, and dead-letters a batch whose nodes keep dying),
// no BackOff. Claim.Deliveries is the message's NumDelivered plus its Txmq-Base header (see
// "Deliveries that are not runs" below). AckWait is one per consumer, so
// nodes with different leases share it: it is the longest lease (or Options.AckWait) any client
// asked for, raised by a client whose lease is longer and never lowered (a lower AckWait would
// cut the leases other clients hold and time by the value they saw). Claim.LeaseUntil and
// Extend report the AckWait this client last saw, which is never more than the server's, so
// every node's claims hold at least its own lease and core extends them in time. A node with
// a shorter lease only loses crash-recovery speed: its dead claims come back after the longer
// AckWait. To lower AckWait, edit or delete the consumer while no node runs. (Two clients
// raising it to different values at the same moment may leave the lower one; a stale cached
// value is refreshed only when this client's own lease needs more.)
//
// Extend sends +WPI (work in progress) and waits for the server's reply. JetStream accepts an
// ack for a redelivered message from its previous holder (acks are keyed by stream sequence),
// so the Backend tracks each lease itself: the deadline is timed from before the pull request
// (the server starts AckWait later, on delivery), and a settle or extension after it, or
// within Options.LeaseMargin of it, returns core.ErrLeaseLost without touching the server.
// The residual risk is an ack sent in time that reaches the server after its AckWait ran out
// (a network stall longer than the margin): the server may then have redelivered the batch
// while accepting the old holder's ack, and the new run's settle is a no-op on the server.
// That is a duplicate run, as at-least-once allows, never a loss. Settles are requests the
// server answers ("double acks"), so a nil error means the server applied them; settling a
// settled claim again is a no-op.
//
// A claim pulled before the connection was re-established is lost too: a server restarted
// from its store (or a failover) may hand out again what it had delivered, while accepting
// the old holder's +WPI. So after a reconnect, every claim pulled earlier answers Extend and
// settles with core.ErrLeaseLost (core then stops its listener), and messages stashed before
// it are not handed out. The price: a network blip re-runs what was in flight then.
//
// # Deliveries that are not runs
//
// Core counts a run as the envelope's attempt plus Claim.Deliveries, and a run is counted only
// when a listener ran. The server counts every delivery, including those this client received
// and never handed to a node: a pulled message waiting in the stash while the queue's slots
// are full, and one left when the Backend closes. (A batch core itself receives too early
// is given back by core, see core.NodeOptions.MaxClockSkew.) NumDelivered cannot be lowered,
// so such a message is given back as a copy: the same
// headers and data (the batch id, a large body's chunk references; the body is not decoded)
// are stored again with Txmq-Base = the deliveries so far minus this one, and only then is the
// delivered message acknowledged; the copy's Deliveries is Txmq-Base plus its own
// NumDelivered. The count lives in the stored message, so it holds across nodes and process
// restarts. A stashed message is given back when half its lease is gone if no Fetch took it
// (a timer, not the next Fetch, since a node at capacity does not fetch the queue), or by
// Close.
// Close waits for outstanding pulls to end on their own rather than cutting them (the client
// would drop what the server already sent), which bounds Close by a pull's wait (the Fetch's
// Wait, at most a quarter of AckWait). Still counted: a delivery whose lease is within the
// margin of its end (it may already run elsewhere), one held by a process that died, and one
// whose copy cannot be stored (an outage; it is then given back with a Nak, logged). If the
// acknowledgement fails after the copy was stored, the batch runs twice, never zero times.
//
// # Exclusive queues
//
// An Exclusive queue's consumer has MaxAckPending 1: the server itself never has more than
// one unacknowledged batch of the queue, whichever node pulls, so exclusivity holds across
// every client of the consumer with no lock service. It is released by the ack of a
// settle, a retry (the rewrite acks the old message), a drop (+TERM) and AckWait expiry. The
// guarantee is per consumer: a second consumer on the same stream (another Prefix-compatible
// tool, or a consumer created by hand) would not share the limit, and work-queue streams
// refuse overlapping consumers anyway.
//
// # Fetch and what an idle queue costs
//
// A Fetch asks, per requested queue, for up to its free slots (Unlimited: the request's Max,
// else Options.FetchLimit), with one pull request that waits up to req.Wait (capped at a
// quarter of the lease). The server answers as soon as messages arrive, so a waiting Fetch
// wakes at once; it returns when it can hand out at least one claim. A pull that outlives
// its Fetch keeps filling a per-queue stash that the next Fetch empties first, so a claim is
// never stranded by an early return or a cancelled ctx; at most one pull per queue is
// outstanding per Backend. A queue whose last pull delivered nothing is idle: its next pull
// waits Options.IdlePull (30 s by default; never less than req.Wait, never more than a
// quarter of the AckWait), outliving the Fetch calls that join it, and a publish still reaches
// it at once. An idle queue thus costs one pull request (and the server's timeout status) per
// node per min(IdlePull, AckWait/4): 480 an hour at the default 30 s lease (measured; 3,600
// at PollWait 1 s when pulls ended with each Fetch), no server-side state beyond the waiting
// request, and nothing while a node is at capacity. A pull whose client went away is not
// delivered to: the server checks the reply subject's interest first. Close waits for
// outstanding pulls (see above), so it can take up to a quarter of the AckWait.
//
// # Delays, retries, never early
//
// A batch due later is published as a JetStream message schedule ("Nats-Schedule: @at
// <time>", nats-server 2.12+) on its own subject, targeting the queue's ready subject: the
// server stores it and publishes the batch when due, with no cap on the delay. The time is on
// the server's clock, the one the schedule fires by: the batch's delay (never the publisher's
// absolute due time) added to the server's time read from a stream info at most 30 s before
// and advanced by this process's monotonic clock, so app/server clock skew cannot make a batch
// early, and the estimate's error (one round trip) can only make it that much late. A
// delivered batch is not compared with this process's clock again.
//
// Retry is a rewrite: the body core re-encoded (with its attempt count) is stored again
// (scheduled when delayed) and only then is the old message acked, so Deliveries restarts at
// 1, the Exclusive slot is released
// during the backoff, and Depths shows the retry as delayed.
//
// # Large bodies
//
// A body larger than the server's max_payload (minus 8 KiB for headers; Options.ChunkSize)
// is stored as chunk messages on the queue's chunk subjects, then a small reference message;
// a fetch reassembles it (direct gets) and the settle removes the chunks. Chunks are written
// before the reference, so a reader never sees a partial body; a failed publish removes the
// chunks it wrote, best effort.
//
// # Outages and errors
//
// The connection reconnects forever and does not buffer while disconnected, so a call made
// during an outage waits for a reconnect up to Options.Timeout and then fails with an error
// wrapping core.ErrBackendUnavailable (errors.go classifies every nats.go and JetStream error
// in one place). Stored batches and consumers live on the server and survive its restart with
// file storage.
package nats
