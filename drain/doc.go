// Package drain is the operator's backend swap: a core.Backend that publishes to a new
// (primary) backend and keeps consuming from the old ones until they are empty.
//
// An app moves from one backend to another (say from SQL jobs to Redis) by changing its
// backend setting and naming the old backend as one to drain (TXMQ_BACKEND=redis://...,
// TXMQ_DRAIN_BACKENDS=postgres://...; the root txmq package reads both and calls New):
//
//	be := drain.New(redisBackend, []core.Backend{sqlJobsBackend}, nil)
//	node, _ := txmq.NewNode(be, nil)
//
// # What each call does
//
//   - Publish goes to the primary backend, so new work (and outbox rows written before the
//     switch, republished by the outbox relay or sweep) lands in the new backend; only a batch
//     of an ordered queue whose key the old backend still holds goes behind it there (see
//     Ordered queues).
//   - Fetch asks every old backend that is not drained first, without waiting, with the
//     node's free slots; then the primary with the slots that are left, waiting up to the
//     request's Wait. A node is never handed more than its free slots in total. Old work is
//     preferred, so the old backends empty as fast as the nodes can run their batches.
//   - Exclusive queues are drained old-first: the primary is not asked for an exclusive queue
//     while an old backend not drained may still hold any batch of it (ready, in flight or
//     delayed), so at most one batch of the queue runs across old and primary together. The
//     old backend's clearance of the queue is read again before each Fetch that asks the
//     primary for it (a clearance younger than CheckInterval is trusted), until the primary
//     has claimed a batch of the queue; an old backend that hands out a batch of the queue
//     again withdraws it. With approximate depths (see below) the readings must be empty for
//     the settle window. A Fetch whose every queue is gated waits up to a second (within its
//     Wait) before returning empty, so a gated node asks the old backend about once a second.
//     This holds once every node runs with the drain setting: a node still on the old
//     setting does not know about the primary.
//   - A claim from an old backend is wrapped (its Handle holds the origin and the inner claim),
//     so Ack, Retry, Drop and Extend go to the backend it came from; claims from the primary
//     are passed through untouched.
//   - Retry of an old-backend claim retries it on the old backend: the old backend keeps the
//     lease, Deliveries and Exclusive semantics it already implements, and the batch stays
//     visible in its depths, so the old backend is not declared drained while a batch still
//     waits for its next run. Draining therefore takes at least as long as the longest retry
//     chain in progress (with the engine's default backoff and budget, about 15 s).
//   - Depths adds up the primary and every old backend, drained ones included.
//   - Close ends waiting fetches and closes the primary and every old backend; every later
//     call fails with an error wrapping core.ErrClosed. Old backends stay open until then, a
//     drained one included, for its re-checks (one idle client or pool each).
//
// # Ordered queues
//
// The wrapper keeps per-key order (it implements core.KeyOrderer) old backend first, per key:
// a key's batches still in the old backend are delivered before that key's batches in the new
// one, while keys with nothing left in the old backend flow from the new one at once. It does
// so at publish: a batch of an ordered queue (txmq.QueueConfig.Ordered) goes to the old backend
// when the old backend still holds any batch of its queue and key (ready, delayed, waiting
// behind the key's head, or in flight), behind them, and to the primary otherwise. A key
// therefore lives in one backend at a time, whose own per-key order (head of line through
// retries, a lost lease redelivered first, a delay holding back its key) applies unchanged;
// Fetch needs nothing more. The same holds for every way a batch reaches Publish: a direct
// publish, the outbox relay and sweep (rows written before the switch included), and a
// dead-letter replay, which goes to the back of its key in whichever backend holds the key.
//
// Costs and conditions:
//
//   - One question to the old backend (core.KeyHolder.HoldsKey) per keyed batch published, as
//     long as the old backend is configured (a drained one included: a node on the old
//     setting may have published the key there since). The memory, sqljobs (one index probe)
//     and redis (one HEXISTS) adapters answer it. With an old backend that does not (sqs,
//     nats), or with more than one old backend, OrdersKeys returns an error and a node over
//     the wrapper refuses ordered queues, naming the queue (drain old backends one at a time).
//   - While the old backend is unreachable, a keyed batch cannot be placed: its Publish fails
//     with the old backend's error (wrapping core.ErrBackendUnavailable), and the node hands
//     the batch to the outbox, which publishes it once the old backend answers again.
//   - A busy key stays in the old backend as long as it has batches there: the old backend
//     empties of a key once the key's traffic leaves a gap its consumers can catch up in.
//     Publishing to a drained old backend makes it polled again at once.
//   - During a rolling deploy, a node still on the old setting publishes every key to the old
//     backend; a key published by nodes on both settings at once may then have batches in both
//     backends, which the wrapper runs independently (one batch per key per backend in
//     flight). Order is promised per producer, and such a key has producers on both sides.
//
// # Message ids that deduplicate
//
// The wrapper deduplicates caller ids (core.IDDeduper, txmq.QueueConfig.IDDedupWindow) when
// the primary does, with the primary's mechanism: publishes go to the primary only. Ids
// published to an old backend before the switch are not known to the primary, so a repeat
// within their window is accepted once more.
//
// # When an old backend is drained, and why that is not final
//
// Every Options.CheckInterval at most (checked during Fetch), the wrapper asks each old
// backend it polls for the Depths of every queue it was asked to fetch so far. An old backend
// is drained when at least two checks in a row found every queue empty (nothing ready, in
// flight or delayed). Draining is logged at Info ("old backend drained"), and the old backend
// is no longer polled by Fetch.
//
// A backend whose counts are approximate and lag (it implements core.ApproximateDepths, as the
// SQS adapter does: a minute) is drained only when its checks read empty continuously for its
// settle window and for at least the longest lease the node asked for (its visibility timeout:
// a batch in flight that the counts missed has then finished or become visible again).
//
// "Drained" is never final while a node on the old setting may still publish to the old
// backend, as it does during a rolling deploy until every node has restarted. A drained old
// backend is checked again every Options.RecheckInterval (default 30 s; one Depths call per
// old backend per node); a re-check that finds any batch (ready, in flight or delayed) logs it
// at Info and polls the old backend again, until it is drained again. Batches published there
// by nodes not restarted yet are therefore delivered within about RecheckInterval, without
// restarting anything. Re-checks go on as long as the wrapper runs; they end when the
// configuration no longer names the old backend. The operator ends the swap: once no node runs
// the old setting any more and `txmq status --drain OLD_URL` (TXMQ_DRAIN_BACKENDS) shows the
// old backend empty, remove it from TXMQ_DRAIN_BACKENDS at the next deploy. Status reports
// what this wrapper sees of each old backend.
//
// A settle of a claim from an old backend goes to that backend, drained or not (its own lease
// rules apply); after Close it returns an error wrapping core.ErrLeaseLost. Queues no node
// listens to are not considered: their batches stay in the old backend (Depths and txmq status
// show them; run a node listening to them before the old backend is retired).
//
// An old backend that fails (unreachable, or hanging) does not stop work from the primary:
// the old backends' calls in one Fetch get at most a third of its time (and 5 s), so the
// primary keeps the rest; a failing old backend's errors are logged once per outage and it is
// left alone for CheckInterval (within 100 ms and 5 s) before it is asked again. While it is
// failing, the exclusive queues it may still hold are not fetched from the primary.
package drain
