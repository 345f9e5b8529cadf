// Package memory is the in-process txmq backend: the embedded default for tests, demos and
// single-node apps. It implements core.Backend with everything kept in the process's memory, so
// batches survive nothing: not a restart, not Close.
//
// Create one Backend and hand the same value to every node that should share work; nodes
// sharing a Backend behave like nodes sharing a Redis or an SQS queue:
//
//	be := memory.New(nil)
//	defer be.Close()
//	node, err := txmq.NewNode(be, nil)
//
// # URL and parameters
//
// The memory:// scheme is always registered (the txmq package imports this one). Open reads:
//
//	memory://                 a new, private Backend on every call
//	memory://NAME             the process-wide Backend of that name, created on first use
//	memory://NAME?txmq_lease=30s&txmq_fetch_limit=1000&txmq_seed=42
//
// Several nodes in one process share work by naming the same backend; once it is closed, the
// next Open of the name starts a fresh, empty one. Parameters follow the scheme of every
// adapter, txmq_<name>:
//
//	txmq_lease        Options.DefaultLease (a Go duration such as 30s)
//	txmq_fetch_limit  Options.FetchLimit
//	txmq_seed         Options.Seed
//
// The names of earlier versions, lease, fetch_limit and seed, are deprecated aliases, still
// accepted; a URL that gives both names of one parameter with different values is refused,
// naming both. Parameters apply when the Backend is created and are ignored when the name is
// already open. A memory backend cannot be reached from another process (the txmq CLI's status
// command says so).
//
// # Delivery semantics
//
//   - Publish stores a copy of the body (the caller's buffer is its own again once Publish
//     returns, see core.OutgoingBatch), and every claim of the batch hands out that copy,
//     read-only; the batch is claimable no earlier than its delay after the publish,
//     on the backend's clock (Options.Clock).
//   - Fetch picks each due batch at random among the 16 that have been ready longest: close
//     to publish order over a backlog, like the other backends, but never FIFO, so listeners
//     that silently depend on publish order fail in tests rather than in production.
//     Options.Seed makes the order reproducible (still not FIFO).
//   - Exclusive queues (QueueSlots.Exclusive) have at most one claimed batch across every node
//     sharing the Backend, released on Ack, Retry, Drop and lease expiry.
//   - A claim holds a lease until Claim.LeaseUntil; an expired lease makes the batch claimable by
//     anyone, with Deliveries incremented at the next handout. Settling or extending a lost
//     lease returns an error wrapping core.ErrLeaseLost; settling a settled claim is a no-op.
//   - Retry rewrites: the new body is stored and Deliveries restarts at 0.
//   - Caller ids deduplicate (core.IDDeduper, txmq.QueueConfig.IDDedupWindow): exact, any
//     window. Each queue keeps a map of the ids it holds with their expiry on the Backend's
//     clock; Publish checks and records them under the Backend's lock with the batch, so two
//     publishes of one id within the window store it once, whichever node makes them.
//   - Unique keys (core.UniqueKeeper, txmq.QueueConfig.Unique): every mode. Each queue maps a
//     key to the record of the batch that took it (and a window end); Publish judges that record
//     (stored, claimed once) under the Backend's lock with the store; see unique.go.
//   - Lease expiry is detected lazily by every call, and a waiting Fetch sets its timer to the
//     earliest delayed due time or lease end among its queues, so it wakes without a reaper
//     goroutine.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches that carry a key
// (txmq.QueueConfig.Ordered): each queue keeps a lane, a FIFO list, per key with stored
// batches. Only a lane's first batch is ever ready, delayed or in flight; the others are held
// (counted as Delayed in Depths) until every earlier one of their key is acked or dropped. A
// retried or expired head stays first, and a delayed head holds its key back. Cost: one map
// entry per key with stored batches (forgotten when its lane empties), O(1) per publish and
// settle; unkeyed batches are untouched. It answers core.KeyHolder (does a lane exist?), so it
// can be the old backend of a drain that keeps per-key order (package drain).
//
// Held batches are stored batches: InspectBatches reports them (delayed, with their own due
// time), so the Inspector lists, finds and cancels them without a ledger. ReplaceBatch edits
// or removes any unclaimed batch of a lane: removing the head lets the key's next batch become
// due (and wakes waiting fetches), as an ack does; removing a held batch keeps the others in
// order; a lane left empty is forgotten, so HoldsKey turns false. A head in flight is not
// removable (core.ErrNotCancellable).
//
// # Limits
//
// No size limit of its own (the Backend does not implement core.SizeLimiter; core's NodeOptions
// limits apply), no delay cap, and as many queues as memory holds. One Fetch hands out at most
// Options.FetchLimit claims (default 1000) across its Unlimited queues when the request's Max
// is 0. Everything is lost when the process ends.
//
// # Errors
//
// Break and Restore simulate an outage for tests: while broken, every call fails with an error
// wrapping core.ErrBackendUnavailable. After Close every call fails with an error wrapping
// core.ErrClosed. A bad URL parameter, an empty queue name, or a claim this Backend did not
// hand out is an error wrapping core.ErrInvalidConfig; a lost lease is core.ErrLeaseLost.
//
// # Cost
//
// Each pick is O(log n) in the queue's due batches. Id dedup costs one map entry per caller id
// for its window (forgotten lazily by later publishes of its queue), O(1) per id; batches
// without caller ids never touch it. The Backend starts no goroutines: an idle
// node costs one timer per waiting Fetch, and nothing else.
package memory
