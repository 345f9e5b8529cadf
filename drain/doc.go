// Package drain is the operator's backend swap: a core.Backend that publishes to a new
// (primary) backend and keeps consuming from the old ones until they are empty.
//
// An app moves from one backend to another (say from SQL jobs to Redis) by changing its
// backend setting and naming the old backend as one to drain (TXMQ_BACKEND=redis://...,
// TXMQ_DRAIN_BACKENDS=postgres://...; the root txmq package reads both and calls New):
//
//	be := drain.New(redisBackend, []core.Backend{sqlJobsBackend}, nil)
//	node, _ := core.NewNode(&core.NodeOptions{Backend: be})
//
// # What each call does
//
//   - Publish goes to the primary backend only, so new work (and outbox rows written before
//     the switch, republished by the outbox relay or sweep) lands in the new backend.
//   - Fetch asks every old backend that is not drained yet first, without waiting, with the
//     node's free slots; then the primary with the slots that are left, waiting up to the
//     request's Wait. A node is never handed more than its free slots in total. Old work is
//     preferred, so the old backends empty as fast as the nodes can run their batches.
//   - Exclusive queues are drained old-first: the primary is not asked for an exclusive queue
//     while an old backend still holds any batch of it (ready, in flight or delayed), so at
//     most one batch of the queue runs across old and primary together. This holds once every
//     node runs with the drain setting: a node still on the old setting does not know about
//     the primary.
//   - A claim from an old backend is wrapped (its Handle holds the origin and the inner claim),
//     so Ack, Retry, Drop and Extend go to the backend it came from; claims from the primary
//     are passed through untouched.
//   - Retry of an old-backend claim retries it on the old backend: the old backend keeps the
//     lease, Deliveries and Exclusive semantics it already implements, and the batch stays
//     visible in its depths, so the old backend is not declared drained while a batch still
//     waits for its next run. Draining therefore takes at least as long as the longest retry
//     chain in progress (with core's default backoff and budget, about 15 s).
//   - Depths adds up the primary and the old backends not drained yet.
//   - Close closes the primary and every old backend not closed yet.
//
// # When an old backend is drained
//
// Every Options.CheckInterval at most (checked during Fetch), the wrapper asks each old
// backend for the Depths of every queue it was asked to fetch so far. When they are all zero
// (nothing ready, in flight or delayed) twice in a row, the old backend is drained: it is no
// longer polled, the event is logged once at Info, and it is closed. A settle of a claim from
// a drained backend returns an error wrapping core.ErrLeaseLost (the backend holds nothing, so
// the lease was lost and the batch ran elsewhere). Queues no node listens to are not
// considered: their batches stay in the old backend (Depths of the old backend shows them
// until then; run a node listening to them before the old backend is retired).
//
// An old backend that fails (unreachable, or hanging) does not stop work from the primary:
// the old backends' calls in one Fetch get at most a third of its time (and 5 s), so the
// primary keeps the rest; a failing old backend's errors are logged once per outage and it is
// left alone for CheckInterval (within 100 ms and 5 s) before it is asked again. While it is
// failing, the exclusive queues it may still hold are not fetched from the primary.
package drain
