package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq/core"
)

func init() {
	register(&command{name: "nodes", summary: "the nodes of the app: queues, slots in use, version, last heartbeat", run: runNodes})
}

// nodeJSON is one node in `txmq nodes --json`.
type nodeJSON struct {
	Node      string           `json:"node"`
	State     string           `json:"state"`
	Queues    []core.NodeQueue `json:"queues"`
	Version   string           `json:"version"`
	StartedAt time.Time        `json:"started_at"`
	LastSeen  time.Time        `json:"last_seen"`
	EveryMS   int64            `json:"every_ms"`
}

func runNodes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nodes", "nodes [--json]\n\nLists the nodes that wrote a heartbeat to the app database in the last day: the queues\neach listens to with their slots in use over caps (batches), its txmq version and when it\nwas last seen. A running node that missed "+fmt.Sprint(core.NodeStaleBeats)+" beats is stale; a closed one, stopped.", stderr)
	f := addDBFlags(fs, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	beats, now, err := store.Nodes().List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]nodeJSON, 0, len(beats))
		for _, b := range beats {
			out = append(out, nodeJSON{Node: b.Node, State: b.State(now), Queues: b.Queues, Version: b.Version,
				StartedAt: b.StartedAt, LastSeen: b.LastSeen, EveryMS: b.Every.Milliseconds()})
		}
		return printJSON(stdout, out)
	}
	if len(beats) == 0 {
		fmt.Fprintln(stdout, "no node has written a heartbeat yet (nodes opened on this app database write one from Start)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tQUEUES (BATCH SLOTS IN USE/CAP)\tVERSION\tLAST SEEN")
	for _, b := range beats {
		qs := make([]string, 0, len(b.Queues))
		for _, q := range b.Queues {
			limit := "∞"
			if q.Cap != core.Unlimited {
				limit = fmt.Sprint(q.Cap)
			}
			qs = append(qs, fmt.Sprintf("%s %d/%s%s", q.Queue, q.InUse, limit, clusterLimits(q)))
		}
		if len(qs) == 0 {
			qs = append(qs, "none")
		}
		version := b.Version
		if version == "" {
			version = "unknown"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", b.Node, b.State(now), strings.Join(qs, ", "), version, now.Sub(b.LastSeen).Round(time.Second))
	}
	return tw.Flush()
}

// clusterLimits describes a queue's cluster-wide limits for the nodes table: "" without any,
// else " (cluster 5, per key 2)".
func clusterLimits(q core.NodeQueue) string {
	var parts []string
	if q.Limit > 0 {
		parts = append(parts, fmt.Sprint("cluster ", q.Limit))
	}
	if q.KeyLimit > 0 {
		parts = append(parts, fmt.Sprint("per key ", q.KeyLimit))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
