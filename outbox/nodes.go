package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
)

// NodeRetention is how long a node's heartbeat row is kept after it was last written: each
// Beat deletes the rows older than that.
const NodeRetention = 24 * time.Hour

// Nodes are the nodes' heartbeats, in the store's schema (table txmq_nodes): one row per node,
// written by each node of the app every few seconds (it implements core.HeartbeatStore;
// txmq.Open sets NodeOptions.Heartbeats to it) and read by the dashboard's nodes page. Get
// them with Store.Nodes. The methods of a nil *Nodes (a nil Store's) return ErrNoDatabase.
// Safe for concurrent use. On a store of another dialect the heartbeats are that database's
// table (ControlDialect).
type Nodes struct {
	pool  *pgxpool.Pool
	table string    // quoted
	tab   NodeTable // set on a store of another dialect: pool and table are unset
}

// Nodes returns the store's node heartbeats; nil for a nil Store.
func (s *Store) Nodes() *Nodes {
	if s == nil {
		return nil
	}
	return s.nodes
}

// newNodes returns the node heartbeats of schema on pool.
func newNodes(pool *pgxpool.Pool, schema string) *Nodes {
	return &Nodes{pool: pool, table: pgx.Identifier{schema, "txmq_nodes"}.Sanitize()}
}

// Beat writes b as its node's row (core.HeartbeatStore), with LastSeen set to the database
// clock, and deletes the rows not written for NodeRetention.
func (n *Nodes) Beat(ctx context.Context, b core.NodeBeat) error {
	if n == nil {
		return errNoStore("Nodes().Beat")
	}
	if b.Node == "" {
		return fmt.Errorf("%w: outbox: Nodes().Beat needs the node's id", core.ErrInvalidConfig)
	}
	queues := b.Queues
	if queues == nil {
		queues = []core.NodeQueue{}
	}
	js, err := json.Marshal(queues)
	if err != nil {
		return fmt.Errorf("txmq outbox: heartbeat of node %q: %w", b.Node, err)
	}
	if n.tab != nil {
		b.Queues = nil
		if err := n.tab.Beat(ctx, NodeRow{Beat: b, QueuesJSON: js}, NodeRetention); err != nil {
			return fmt.Errorf("txmq outbox: writing the heartbeat of node %q: %w", b.Node, err)
		}
		return nil
	}
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO `+n.table+` (node, queues, version, started_at, every_ms, last_seen, stopped)
		VALUES ($1, $2, $3, $4, $5, now(), $6)
		ON CONFLICT (node) DO UPDATE SET queues = EXCLUDED.queues, version = EXCLUDED.version,
			started_at = EXCLUDED.started_at, every_ms = EXCLUDED.every_ms, last_seen = now(),
			stopped = EXCLUDED.stopped`,
		b.Node, js, b.Version, b.StartedAt, b.Every.Milliseconds(), b.Stopped)
	batch.Queue(`DELETE FROM `+n.table+` WHERE last_seen < now() - $1 * interval '1 millisecond'`, NodeRetention.Milliseconds())
	if err := n.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("txmq outbox: writing the heartbeat of node %q: %w", b.Node, err)
	}
	return nil
}

// List returns the nodes' last heartbeats, most recently seen first, and the database's
// clock at the read (compare LastSeen with it, not with the local clock).
func (n *Nodes) List(ctx context.Context) ([]core.NodeBeat, time.Time, error) {
	if n == nil {
		return nil, time.Time{}, errNoStore("Nodes().List")
	}
	if n.tab != nil {
		return n.listOn(ctx)
	}
	rows, err := n.pool.Query(ctx, `SELECT node, queues, version, started_at, every_ms, last_seen, stopped, now()
		FROM `+n.table+` ORDER BY last_seen DESC, node`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("txmq outbox: reading node heartbeats: %w", err)
	}
	var now time.Time
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.NodeBeat, error) {
		var b core.NodeBeat
		var js []byte
		var everyMS int64
		if err := r.Scan(&b.Node, &js, &b.Version, &b.StartedAt, &everyMS, &b.LastSeen, &b.Stopped, &now); err != nil {
			return b, err
		}
		b.Every = time.Duration(everyMS) * time.Millisecond
		return b, json.Unmarshal(js, &b.Queues)
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("txmq outbox: reading node heartbeats: %w", err)
	}
	return list, now, nil
}

// listOn is List on a NodeTable.
func (n *Nodes) listOn(ctx context.Context) ([]core.NodeBeat, time.Time, error) {
	rows, now, err := n.tab.List(ctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("txmq outbox: reading node heartbeats: %w", err)
	}
	list := make([]core.NodeBeat, 0, len(rows))
	for _, r := range rows {
		b := r.Beat
		if err := json.Unmarshal(r.QueuesJSON, &b.Queues); err != nil {
			return nil, time.Time{}, fmt.Errorf("txmq outbox: reading node heartbeats: node %q: %w", b.Node, err)
		}
		list = append(list, b)
	}
	return list, now, nil
}
