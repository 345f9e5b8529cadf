package redis

import "github.com/txmq/txmq/core"

// Cluster-wide limits (core.ClusterLimiter). The queue's lease set (a sorted set of the batches
// in flight by lease end) is already the cluster-wide record of what runs: the claim script of
// a queue with a limit (core.QueueSlots.Limit) counts its live leases, those ending after the
// server's now (ZCOUNT), and claims at most the limit minus that, atomically with the claim.
// Every settle removes its lease and an expired lease stops counting by itself, so a crashed,
// paused or partitioned node's slots come back after its lease with nothing else to clean up;
// the settle of a limited batch wakes the fetches waiting for the queue, as an Exclusive
// batch's does. Exclusive keeps its own rule (no live lease at all).
//
// KeyLimit (fair queues only) is enforced by the fair claim (fair.go): it reads the queue's
// live leases and their fairness keys and passes over a key with KeyLimit of them, which
// keeps its place in the turn. As with Exclusive, a lease Redis forgets (a failover to a
// replica that had not seen it, a restart without persistence) lets a limit be exceeded until
// the forgetting node's runs end: see the package doc's durability notes.
//
// Cost: one ZCOUNT (O(log n)) in the claim script of a limited queue; with a KeyLimit, a read
// of the live leases and one HMGET of their keys per claim (bounded by what runs: at most the
// ClusterLimit, or the nodes' concurrency); none on other queues.

var _ core.ClusterLimiter = (*Backend)(nil)

// LimitsClaims implements core.ClusterLimiter: the claim script enforces QueueSlots.Limit.
func (be *Backend) LimitsClaims() error { return nil }
