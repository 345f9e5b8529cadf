// Package memory is the in-process txmq backend: the embedded default for tests, demos and
// single-node apps. It implements core.Backend with everything kept in the process's memory, so
// batches survive nothing: not a restart, not Close.
//
// Create one Backend and hand the same value to every node that should share work; nodes sharing
// a Backend behave like nodes sharing a Redis or an SQS queue:
//
//	be := memory.New(nil)
//	defer be.Close()
//	node, err := core.NewNode(&core.NodeOptions{Backend: be})
//
// # Semantics
//
//   - Publish keeps the body without copying it (published bodies are read-only, see
//     core.OutgoingBatch); the batch is claimable no earlier than its delay after the publish,
//     on the backend's clock (Options.Clock).
//   - Fetch picks due batches in a random order, never FIFO, so listeners that silently depend
//     on publish order fail in tests rather than in production. Each pick is O(log n).
//   - Exclusive queues (QueueSlots.Exclusive) have at most one claimed batch across every node
//     sharing the Backend, released on Ack, Retry, Drop and lease expiry.
//   - A claim holds a lease until Claim.LeaseUntil; an expired lease makes the batch claimable by
//     anyone, with Deliveries incremented at the next handout. Settling or extending a lost
//     lease returns an error wrapping core.ErrLeaseLost; settling a settled claim is a no-op.
//   - Retry rewrites: the new body is stored and Deliveries restarts at 0.
//   - Lease expiry is detected lazily by every call, and a waiting Fetch sets its timer to the
//     earliest delayed due time or lease end among its queues, so it wakes without a reaper
//     goroutine. The Backend starts no goroutines.
//
// Break and Restore simulate an outage for tests: while broken, every call fails with an error
// wrapping core.ErrBackendUnavailable.
package memory
