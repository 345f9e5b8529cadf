package core

import (
	"context"
	"time"
)

// NodeBeat is one node's heartbeat: who it is, what it listens to and how busy it is, as
// written by the node every few seconds (NodeOptions.Heartbeats) and read by the dashboard's
// nodes page.
type NodeBeat struct {
	// Node is the node's id (Node.ID).
	Node string
	// Queues are the queues the node listens to, by name, with their slots.
	Queues []NodeQueue
	// Version is the txmq module version the node runs ("(devel)" in a build of the module
	// itself, "" when unknown).
	Version string
	// StartedAt is when the node started fetching, by the node's clock.
	StartedAt time.Time
	// Every is how often the node writes its heartbeat: a row whose LastSeen is older than
	// three of them is stale (the node died or lost the database).
	Every time.Duration
	// LastSeen is when the row was last written, by the database clock (set by the store;
	// ignored in a write).
	LastSeen time.Time
	// Stopped is true in the last row a node writes as it closes.
	Stopped bool
}

// NodeQueue is one listened queue in a NodeBeat.
type NodeQueue struct {
	// Queue is the queue name.
	Queue string `json:"queue"`
	// InUse is how many of its batches hold a slot on the node (running or settling).
	InUse int `json:"in_use"`
	// Cap is the node's slot cap for it: its concurrency (1 for an Exclusive queue), or
	// Unlimited.
	Cap int `json:"cap"`
	// Limit is the queue's cluster-wide limit (txmq.QueueConfig.ClusterLimit; 1 for an
	// Exclusive queue), 0 for none; KeyLimit its limit per fairness key, 0 for none. Every
	// node listening to the queue reports the same: they are the queue's, not the node's.
	Limit    int `json:"limit,omitempty"`
	KeyLimit int `json:"key_limit,omitempty"`
	// Minutes is what the node ran of the queue in each of the last 60 minutes that saw a
	// run, oldest first (the current minute so far last): the dashboard adds up every node's
	// for its cluster-wide chart. Empty when the node ran nothing of it in the last hour.
	Minutes []NodeMinute `json:"minutes,omitempty"`
}

// NodeMinute is what a node ran of one queue in one minute, as a heartbeat carries it (short
// JSON names: a beat carries up to 60 per queue).
type NodeMinute struct {
	// Minute is the start of the minute, in Unix seconds.
	Minute int64 `json:"m"`
	// Batches and Messages count the runs that ended in that minute and what they held.
	Batches  int64 `json:"b"`
	Messages int64 `json:"n"`
	// Failed counts the runs that failed (an error, a panic, a timeout or a lost lease).
	Failed int64 `json:"f"`
}

// HeartbeatStore keeps the nodes' heartbeats, one row per node (package outbox's Nodes). The
// heartbeat feature calls Beat every NodeBeat.Every from Start to Close, and once more with
// Stopped set as the node closes.
type HeartbeatStore interface {
	// Beat writes b as its node's row, replacing the previous one, and stamps LastSeen.
	Beat(ctx context.Context, b NodeBeat) error
}

// NodeStaleBeats is how many heartbeats a running node may miss before readers call it
// stale (it died without closing, or lost the app database).
const NodeStaleBeats = 3

// The states NodeBeat.State returns.
const (
	NodeRunning = "running"
	NodeStopped = "stopped"
	NodeStale   = "stale"
)

// State returns NodeStopped for the last row of a closed node, NodeStale when a running
// node's LastSeen is more than NodeStaleBeats of its Every before now (the database's clock
// at the read), else NodeRunning.
func (b NodeBeat) State(now time.Time) string {
	switch {
	case b.Stopped:
		return NodeStopped
	case b.Every > 0 && now.Sub(b.LastSeen) > NodeStaleBeats*b.Every:
		return NodeStale
	}
	return NodeRunning
}
