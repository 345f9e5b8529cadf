package ui

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
)

// nodeRow is one row of the Nodes page.
type nodeRow struct {
	core.NodeBeat
	// State is "running", "stopped" (its last row, written by Close) or "stale" (no beat for
	// core.NodeStaleBeats of its intervals): NodeBeat.State.
	State string
	// Age is how long ago the node was last seen, by the database clock.
	Age time.Duration
	// InUse and Cap are the node's slots over all its queues (Cap -1: some queue has no cap).
	InUse, Cap int
}

// nodes serves the Nodes page: every node that wrote a heartbeat to the app database in the
// last day (outbox.Nodes), with its queues, slots in use, version and last beat; the node
// serving the page, when mounted in the app, is marked.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	beats, now, err := s.o.Store.Nodes().List(ctx)
	var errs []string
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "txmq_nodes") && strings.Contains(msg, "does not exist") {
			msg += " (the schema predates the heartbeats: run `txmq migrate`)"
		}
		errs = append(errs, msg)
	}
	rows := make([]nodeRow, 0, len(beats))
	for _, b := range beats {
		row := nodeRow{NodeBeat: b, State: b.State(now), Age: now.Sub(b.LastSeen).Round(time.Second)}
		for _, q := range b.Queues {
			row.InUse += q.InUse
			if row.Cap != core.Unlimited {
				row.Cap += q.Cap
			}
			if q.Cap == core.Unlimited {
				row.Cap = core.Unlimited
			}
		}
		rows = append(rows, row)
	}
	self := "" // the serving node, when mounted in the app (ForApp)
	if s.o.Node != nil {
		self = s.o.Node.ID()
	}
	s.render(w, r, "nodes.html", map[string]any{"Title": "Nodes", "Rows": rows, "Errors": errs, "StaleBeats": core.NodeStaleBeats, "Self": self})
}
