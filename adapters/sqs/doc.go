// Package sqs is the Amazon SQS backend of txmq (aws-sdk-go-v2). Import it for its side effect
// to register the sqs:// and awssqs:// URL schemes, or build one with New. It is a module of
// its own (go get github.com/txmq/txmq/adapters/sqs), so only apps that use it require the AWS
// SDK:
//
//	be, err := sqs.New(ctx, &sqs.Options{Prefix: "shop-"}) // AWS config chain for region and credentials
//	node, err := txmq.NewNode(be, nil) // PollWait defaults to 20 s here
//
// # URL and parameters
//
// Importing the package registers the sqs:// and awssqs:// schemes:
//
//	sqs://                                   the AWS config chain decides everything
//	sqs://eu-west-1?txmq_prefix=shop-        region as the host
//	awssqs://KEY:SECRET@us-east-1?txmq_endpoint=http://127.0.0.1:4566
//
// The host, when present, is the region. User and password, when present, are static
// credentials (for emulators; in production leave them out and let the AWS config chain find
// credentials); they never appear in errors or logs. Query parameters follow the scheme of
// every adapter, txmq_<name>, and set Options:
//
//	txmq_region              Options.Region
//	txmq_endpoint            Options.Endpoint (an absolute URL)
//	txmq_prefix              Options.Prefix
//	txmq_max_native_delay    Options.MaxNativeDelay (a Go duration)
//	txmq_max_message_bytes   Options.MaxMessageBytes
//	txmq_overflow_dir        Options.Overflow = NewDirOverflow(dir)
//	txmq_retry_max_attempts  Options.RetryMaxAttempts
//	txmq_request_timeout     Options.RequestTimeout (a Go duration)
//	txmq_idle_wait           Options.IdleWait (a Go duration)
//
// Any other parameter is an error wrapping core.ErrInvalidConfig that lists the accepted ones.
//
// Credentials: with Options.Client, that client is used as is. With Options.Credentials, the
// client is built from Region, Endpoint and the provider alone, never consulting the
// environment (tests do this). Otherwise config.LoadDefaultConfig runs the normal AWS chain
// (environment, shared config, SSO, ECS/EC2 roles).
//
// # Delivery semantics
//
// Every txmq queue is one SQS queue named Prefix+name (default prefix "txmq-"), a standard
// queue, created on first use (or up front by EnsureQueues) with 14-day retention. An Exclusive
// queue is a FIFO queue, Prefix+name+".fifo", and so is an Ordered queue (see Ordering). Each txmq queue also has a holding queue,
// Prefix+name+"-Delayed" (standard), for batches not due soon enough for SQS's own delay (see
// below). Queue URLs are cached per client; concurrent first uses of a queue share one lookup
// (and creation), and a Fetch looks up its queues concurrently, each in its own poll.
//
// Fetch keeps at most one ReceiveMessage outstanding per SQS queue per client, however many
// queues it serves: all requested queues are polled concurrently, a queue that had work last
// time with a short poll (no waiting), an idle one with a long poll of Options.IdleWait (20 s,
// SQS's maximum, by default) or the node's PollWait rounded up to whole seconds, whichever is
// longer. Fetch returns as soon as any queue yields claims; the other polls keep running, and
// what they receive waits in the client for the next Fetch (Fetch is called again at once by
// the node), so a poll is never cut short in the middle of a response and no message is hidden
// without being handed out. Batches that wait there half a lease (their queue's slots stayed
// full, so no Fetch asked for them) are given back then, by a timer rather than by the next
// Fetch, by re-sending them, so the receive is not counted as a run. MaxNumberOfMessages is the
// queue's free slots (at most 10); VisibilityTimeout is the lease.
//
// Cancelling a Fetch's ctx returns at once with the claims already received. Close does not cut
// the outstanding polls: a receive cut short may have made SQS hide messages it never
// delivered, which would come back after the visibility timeout with a receive count one higher
// (a run spent that never ran). Nor does it wait them out (up to IdleWait, 20 s by default): it
// sends each long poll's SQS queue a wake message, which ends a waiting receive at once like
// any message, and again every second while its poll still waits (in SQS a message goes to
// one waiting receive, possibly another client's). The poll then returns a normal response,
// and Close gives back everything received and not handed out, re-sent as below. Every client
// deletes a wake it receives and never hands it out; a wake that arrives after the poll it
// was for ended on its own (rare: Close wakes only polls with more than half a second left)
// waits in the queue, counted by Depths, until the next receive there deletes it. A wake is
// a SendMessage and a DeleteMessage per long-polled queue at Close. A client of an earlier
// version does not know wakes: it hands one to its node as a batch that cannot be decoded,
// which the node drops (reason undecodable, counted by the Dropped hook), so a fleet rolling
// onto this version may count a few such drops, and loses nothing.
//
// Leases and settles: the lease is the visibility timeout (whole seconds, rounded up), and
// Extend is ChangeMessageVisibility. A claim's LeaseUntil is counted from the start of the
// receive (or from shortly before the response of a long poll) and ends a tenth of the
// timeout (at most 200 ms) before it, so it is never later than SQS's own deadline, even on a
// server whose visibility clock runs a little early. A settle (Ack, Drop, Retry) or Extend
// after LeaseUntil returns core.ErrLeaseLost without calling SQS: DeleteMessage with a
// receipt handle from an earlier receive can succeed in real SQS, deleting a message another
// node now runs, so the client-side check is what makes a stale settle safe; SQS's own
// refusals (ReceiptHandleIsInvalid, MessageNotInflight, InvalidParameterValue for an expired
// handle) also map to core.ErrLeaseLost. Settling a settled claim again is a no-op. Ack and
// Drop are DeleteMessage.
//
// Deliveries and the engine's attempt count: Claim.Deliveries is SQS's ApproximateReceiveCount
// plus a txmq-base attribute (0 unless the adapter itself moved the message, see below). The
// receive count includes redeliveries after a node died holding the batch, which is exactly what
// the engine needs: it counts a run as the envelope's attempt plus Deliveries, so a batch whose
// nodes keep dying is dead-lettered as worker_lost once the budget is spent. Receives that are not
// runs are kept out of the count: a not-yet-due batch received early is re-sent (the new message
// starts at 0, with the same base), and a batch received but never handed out (by half its lease,
// or at Close) is re-sent with base raised by its receives minus that one. The count resets
// whenever a message is re-sent, which is why the base travels with it: it lives in the stored
// message, so it holds across clients and process restarts. A receive is still counted when the
// client holding it dies before giving it back (a crash, or a kill during Close), like a run whose
// node died; and when the re-send fails (an outage), the message is made visible again and that
// receive counts (logged).
//
// Retry with 0 < delay <= 12 h on a standard queue is in place: ChangeMessageVisibility(delay)
// keeps the old body and the receive count goes on (the engine's next run = old attempt + the
// count, the same number the re-encoded body would carry). Any other retry is a rewrite: the new
// body is sent (with the delay, see below) and the old message deleted, and Deliveries restarts.
// Exclusive queues always rewrite, so the FIFO group is not blocked during the backoff (a keyed
// batch of an Ordered queue is the exception: always in place, see Ordering), and so does delay 0,
// which the engine uses to hand back a run it does not count (a node closing). A rewrite whose
// delete fails leaves a duplicate, as at-least-once allows.
//
// Exclusive queues: SQS has no lock, but a FIFO queue never hands out a message of a message
// group while another of the same group is in flight. Every batch of an Exclusive queue goes to
// its FIFO queue with one message group, so SQS itself guarantees at most one claimed batch in
// the whole cluster, released by Ack, Drop, Retry (the rewrite deletes it) and visibility
// expiry. Publish uses the batch id as the deduplication id, so a batch re-published within
// five minutes (an outbox sweep repeating itself) is stored once; a publish that sets
// core.OutgoingBatch.PublishID (a dead-letter replay) uses that instead, and is stored.
//
// Delays are judged on SQS's clock alone: a batch travels with its delay as a duration
// (core.OutgoingBatch.Delay), never with the publisher's absolute due time, so app/SQS clock
// skew cannot make it early or late. A batch due within MaxNativeDelay (15 min, SQS's
// DelaySeconds cap) goes to the main queue with DelaySeconds rounded up: never early. A batch
// due later goes to the holding queue with its delay in a txmq-delay-ms attribute (counted from
// that message's SentTimestamp) and a DelaySeconds that makes it visible about half the cap
// before it is due; fetching nodes poll the holding queue every third of the cap, compute what
// is left from SQS's own SentTimestamp and ApproximateFirstReceiveTimestamp, and move each
// batch to the main queue with DelaySeconds for the rest (or back into the holding queue, for
// another round, when it is still far off), so it is never early and not late by more than a
// second's rounding; each round costs a receive, a send and a delete (12 requests per hour of
// delay per batch) and restarts SQS's 14-day retention clock. FIFO queues have no per-message
// delay, so every delayed batch of an Exclusive queue waits in the holding queue (long-polled)
// and is moved into the FIFO queue when due. A main-queue message with delay left is moved
// back, not handed out. Messages written by older versions carry txmq-not-before (the sender's
// clock) and are still honoured. Depths counts the holding queue as delayed.
//
// Caller ids do not deduplicate here: the Backend reports core.IDDeduper as unsupported, so a
// node refuses a queue declared with txmq.QueueConfig.IDDedupWindow (an error naming the
// queue). SQS standard queues have no dedup at all, and FIFO dedup (MessageDeduplicationId)
// has a fixed 5-minute window over whole messages and already carries the batch id for the
// Exclusive and Ordered queues. Ids still travel with the messages (txmq.MessageIDs): publish
// an id twice and it is delivered twice, as with any at-least-once delivery.
//
// Unique queues (txmq.QueueConfig.Unique) are refused the same way (the Backend does not
// implement core.UniqueKeeper: SQS keeps no state a publish could judge an earlier batch by),
// at NewNode, naming the queue and the mode.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) with SQS's FIFO message groups. A keyed
// batch (an Ordered queue, core.OutgoingBatch.Key) goes to the queue's FIFO queue,
// Prefix+name+".fifo", with MessageGroupId = its key (and the txmq-key attribute), or the one
// group of an Exclusive queue when the queue is both (a total order, which keeps every key's).
// SQS never hands out a message of a group while an earlier one of it is in flight, and
// delivers a group in send order, so one batch per key is claimed at a time, in publish order,
// while keys flow in parallel. Nodes poll the FIFO queue for an Ordered queue
// (core.QueueSlots.Ordered); the node refuses a publish without a key there.
//
//   - Head of line: a keyed batch is always retried in place (ChangeMessageVisibility for the
//     backoff, capped at 12 h, SQS's longest visibility), so it stays in flight and first of its
//     key; a rewrite would send it to the back. A lost lease (visibility expiry) makes it
//     visible again, still first of its group.
//   - Delays: a FIFO queue has no per-message delay, and a holding queue would let later
//     messages of the key pass. A delayed keyed batch is sent at once, in its place, with its
//     delay in the txmq-delay-ms attribute; received before it is due (judged on SQS's clock
//     from SentTimestamp and ApproximateFirstReceiveTimestamp, as above), it is not handed out
//     but hidden (ChangeMessageVisibility) for what is left, at most 12 h a time, so it stays in
//     flight and its key waits. Those early receives are not counted as runs: a receive is
//     early while fewer hides than the delay needs have passed. If a hide fails (SQS outage
//     between the receive and the hide), the batch comes back after the lease and may run
//     early: the one case where a keyed delay is not honoured to the second. On an Exclusive
//     Ordered queue a delay holds back the whole queue (it has one group).
//   - A keyed batch received but not handed out (half a lease in the stash, or at Close) is
//     made visible again in place, not re-sent (which would move it to the back of its key), so
//     that receive counts as a delivery, unlike on other queues.
//
// Cost: an Ordered queue receives one message per ReceiveMessage (SQS may return several
// messages of one group in one receive, which would run side by side), so a node's pickup is
// bounded by one receive round trip per batch per queue; an idle Ordered queue costs what an
// idle standard queue does (one long poll of its FIFO queue, and the holding queue's short
// polls). A delayed keyed batch costs one ChangeMessageVisibility per 12 h of delay, and no
// moves. Publish uses the batch id as the FIFO deduplication id, as for Exclusive.
//
// # Limits
//
// An SQS message is at most MaxMessageBytes (256 KiB by default, SQS's classic limit), body
// plus attributes; the Backend does not implement core.SizeLimiter, because a larger batch
// still travels (compressed, split or through Overflow, below). SQS's DelaySeconds stops at
// MaxNativeDelay (15 min); longer delays go through the holding queue and have no cap. Leases
// are whole seconds of visibility timeout, and a retry in place at most 12 h. A receive takes
// at most 10 messages. A txmq queue name must match ^[a-z][a-z0-9_-]{0,63}$, and
// Prefix+name+"-Delayed" must fit SQS's 80-character queue names, else the call fails with an
// error wrapping core.ErrInvalidConfig. Queues keep batches 14 days (SQS's longest retention).
// Depths leaves core.Depth.OldestReady zero: SQS's queue attributes give approximate counts only.
//
// Large batches: a body that fits in MaxMessageBytes (256 KiB, including attributes) travels as
// is (base64 when it is not valid SQS text, such as non-UTF-8 bytes or characters outside the
// Basic Multilingual Plane, which some SQS-compatible servers refuse). A larger one is gzipped
// and base64-encoded (JSON typically shrinks 5-10x). If it still does not fit, it goes to the
// Overflow store (the SQS Extended Client pattern: the body in a store, the key in the
// message), deleted when the batch is acked, dropped or rewritten. Without an Overflow store
// the batch is split by messages into smaller batches that fit (a batch is only a unit of
// delivery, so its messages may travel apart), never truncated; a single message that does not
// fit even alone fails the Publish with an error wrapping core.ErrRejected and
// core.ErrInvalidPayload. Configure an Overflow store (DirOverflow on a shared volume, or an
// S3-backed Overflow of your own) if single messages can exceed the limit. Splitting one
// batch's bytes across several SQS messages was rejected: SQS cannot group messages atomically,
// and chunks of one batch would reach different nodes.
//
// # Errors
//
// SDK errors are classified in one place (errors.go): throttling, 5xx, connection errors and
// timeouts wrap core.ErrBackendUnavailable; QueueDoesNotExist (the cached URL is dropped and
// the queue re-created on next use), access denied and validation errors do not. SQS refusing a
// message itself (invalid characters, a parameter value such as its size out of range) wraps
// core.ErrRejected, so the batch is dead-lettered rather than retried; refused receipt handles
// on settles and extensions wrap core.ErrLeaseLost (see above).
//
// # Cost
//
// Id dedup is not supported (see Delivery semantics), so publishes with caller ids cost what
// any publish does.
//
// Fetch long-polls only idle queues, one receive outstanding per SQS queue (see Delivery
// semantics), so an idle standard queue costs 3600/W ReceiveMessage requests per hour per node,
// W being the long-poll wait in seconds: 180 at the default IdleWait, whatever the node's
// PollWait (measured: 180 at PollWait 1 s, 3,600 before the receive outlived a short Fetch; a
// node still reacts at once to work, since a long poll returns as soon as a message arrives).
// Its holding queue adds a short poll every third of MaxNativeDelay (12 an hour with the
// 15-minute default). An idle Exclusive queue costs twice the main figure, because its holding
// queue (which carries every delayed batch, see Delivery semantics) is long-polled too. With
// 1,000,000 requests costing about $0.40, a queue idling with 20 s long polls costs under
// $0.0001 an hour per node.
//
// A delay longer than MaxNativeDelay costs a receive, a send and a delete per round through the
// holding queue: 12 requests per hour of delay per batch. Ack and Drop are one DeleteMessage
// each, Extend one ChangeMessageVisibility; a retry that rewrites is a send and a delete.
package sqs
