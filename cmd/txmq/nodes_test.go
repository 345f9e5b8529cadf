package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestNodesCommand: `txmq nodes` lists each node's heartbeat (queues with slots in use over
// caps, version, state), in a table and in JSON.
func TestNodesCommand(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", url, "--schema", schema}
	cli := func(wantCode int, args ...string) string { t.Helper(); return cliText(t, wantCode, args...) }
	cli(exitOK, append([]string{"migrate"}, db...)...)
	if out := cli(exitOK, append([]string{"nodes"}, db...)...); !strings.Contains(out, "no node has written a heartbeat yet") {
		t.Fatalf("nodes on an empty table: %s", out)
	}
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, b := range []core.NodeBeat{
		{Node: "worker-a", Queues: []core.NodeQueue{{Queue: "emails", InUse: 2, Cap: 8}, {Queue: "jobs", Cap: core.Unlimited}, {Queue: "charges", InUse: 1, Cap: 5, Limit: 5, KeyLimit: 2}}, Version: "v1.4.0", StartedAt: time.Now(), Every: time.Hour},
		{Node: "worker-b", StartedAt: time.Now(), Every: time.Hour, Stopped: true},
	} {
		if err := store.Nodes().Beat(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	out := cli(exitOK, append([]string{"nodes"}, db...)...)
	for _, want := range []string{"worker-a", "running", "emails 2/8, jobs 0/∞, charges 1/5 (cluster 5, per key 2)", "v1.4.0", "worker-b", "stopped", "none", "unknown"} {
		if !strings.Contains(out, want) {
			t.Fatalf("nodes lacks %q:\n%s", want, out)
		}
	}
	var listed []nodeJSON
	if err := json.Unmarshal([]byte(cli(exitOK, append([]string{"nodes", "--json"}, db...)...)), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("nodes --json: %+v %v", listed, err)
	}
	for _, n := range listed {
		if n.Node == "worker-a" && (n.State != core.NodeRunning || len(n.Queues) != 3 || n.Queues[2].KeyLimit != 2 || n.Queues[0].InUse != 2 || n.EveryMS != time.Hour.Milliseconds()) {
			t.Errorf("nodes --json row of worker-a: %+v", n)
		}
	}
}
