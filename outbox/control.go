package outbox

import (
	"context"
	"database/sql"
	"time"

	"github.com/txmq/txmq/core"
)

// The control tables on a database other than PostgreSQL. A Store on PostgreSQL (New) keeps
// its pause marks, schedule ticks, rate buckets and node heartbeats in its schema with pgx.
// A Store of another dialect (NewWithDialect) has them when its Dialect implements
// ControlDialect: Store.Pauses, Ticks, Limits and Nodes then return the same types as on
// PostgreSQL, on the dialect's tables, and txmq.Open gives them to the node. The policy stays
// here (what a claimed tick stages, when the relay wakes, how long a node waits for a token);
// the dialect only runs the statements. A table the dialect does not keep (a nil from its
// constructor) stays unset on the Store: Store.Pauses (Ticks, Limits, Nodes) returns nil, as
// on a dialect without ControlDialect.

// ControlDialect is implemented by a Dialect that keeps the control tables of the schema: the
// queues' pause marks, the schedules' claimed ticks, the shared rate buckets and the nodes'
// heartbeats, each meaning across the nodes of the app what it means on PostgreSQL. Each
// constructor returns nil when the database does not keep that table. NewWithDialect calls
// each once.
type ControlDialect interface {
	// PauseTable returns the queues' pause marks (Store.Pauses).
	PauseTable() PauseTable
	// TickTable returns the schedules' claimed ticks (Store.Ticks).
	TickTable() TickTable
	// RateTable returns the shared token buckets (Store.Limits).
	RateTable() RateTable
	// NodeTable returns the nodes' heartbeats (Store.Nodes).
	NodeTable() NodeTable
}

// PauseTable keeps the queues' pause marks (Pauses), one row per paused queue. Safe for
// concurrent use.
type PauseTable interface {
	// Pause marks queue paused by by, with the database's clock as PausedAt; a queue already
	// paused keeps its first mark.
	Pause(ctx context.Context, queue, by string) error
	// Resume removes queue's mark (none: nothing happens).
	Resume(ctx context.Context, queue string) error
	// PausedQueues returns every mark.
	PausedQueues(ctx context.Context) ([]PausedQueue, error)
}

// TickTable keeps the schedules' claimed ticks (Ticks): one row per claimed tick, whose
// primary key (schedule, tick) admits it once whatever the number of nodes claiming it at
// once, and per schedule its last and next tick. Safe for concurrent use.
type TickTable interface {
	// InTickTx runs fn in a transaction of its own on the app database's *sql.DB, committed
	// when fn returns nil and rolled back otherwise (fn's error returned as is). When the
	// database rolls the transaction back for a reason that passes (a deadlock victim), it
	// may run fn again in a new transaction.
	InTickTx(ctx context.Context, fn func(ctx context.Context, tx TickTx) error) error
	// LastTick returns the latest claimed tick of schedule, zero if none.
	LastTick(ctx context.Context, schedule string) (time.Time, error)
	// Recent returns the latest n claimed ticks of schedule, newest first.
	Recent(ctx context.Context, schedule string, n int) ([]time.Time, error)
	// Schedules returns the schedules that claimed a tick, by name.
	Schedules(ctx context.Context) ([]ScheduleRow, error)
	// Prune deletes the claimed ticks of schedule before before.
	Prune(ctx context.Context, schedule string, before time.Time) error
}

// TickTx is the transaction of TickTable.InTickTx.
type TickTx interface {
	// Tx is the transaction itself: the tick's messages are written into it (WithSQLTx).
	Tx() *sql.Tx
	// Claim inserts the claim of tick of schedule and reports whether it did: false when the
	// tick was claimed before (by a transaction that committed; it waits for one still open).
	Claim(ctx context.Context, schedule string, tick time.Time) (bool, error)
	// Record sets schedule's queue, last tick (never moved back) and next tick (zero: none).
	Record(ctx context.Context, schedule, queue string, tick, next time.Time) error
}

// RateTable keeps the shared token buckets (Limits), one row per queue, each refilled at
// perSecond tokens a second up to burst by the database's clock, and read and changed in one
// transaction at a time, so that every node of the app takes from the same bucket. Safe for
// concurrent use.
type RateTable interface {
	// Take refills queue's bucket (a new bucket starts full), takes min(want, whole tokens
	// in it) and returns that and the tokens left.
	Take(ctx context.Context, queue string, want, burst int, perSecond float64) (got int, left float64, err error)
	// Return refills queue's bucket and puts n tokens back, up to burst.
	Return(ctx context.Context, queue string, n, burst int, perSecond float64) error
}

// NodeTable keeps the nodes' heartbeats (Nodes), one row per node. Safe for concurrent use.
type NodeTable interface {
	// Beat writes r as its node's row, LastSeen set to the database's clock, and deletes the
	// rows not written for retention.
	Beat(ctx context.Context, r NodeRow, retention time.Duration) error
	// List returns every row, most recently seen first (then by node), and the database's
	// clock at the read.
	List(ctx context.Context) ([]NodeRow, time.Time, error)
}

// NodeRow is a heartbeat as a NodeTable stores it: the beat without its queues, and the
// queues as JSON (an array of core.NodeQueue).
type NodeRow struct {
	// Beat is the heartbeat; its Queues are in QueuesJSON.
	Beat core.NodeBeat
	// QueuesJSON is Beat's queues, encoded by the Store.
	QueuesJSON []byte
}

// controlTables sets s's pause marks, ticks, limits and nodes from d's tables, when d keeps
// them (ControlDialect).
func (s *Store) controlTables(d Dialect) {
	cd, ok := d.(ControlDialect)
	if !ok {
		return
	}
	if t := cd.PauseTable(); t != nil {
		s.pauses = &Pauses{tab: t}
	}
	if t := cd.TickTable(); t != nil {
		s.ticks = &Ticks{s: s, tab: t}
	}
	if t := cd.RateTable(); t != nil {
		s.limits = &Limits{tab: t}
	}
	if t := cd.NodeTable(); t != nil {
		s.nodes = &Nodes{tab: t}
	}
}
