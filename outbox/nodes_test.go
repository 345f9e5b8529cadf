package outbox_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// TestNodesBeatAndList: a beat replaces its node's row, List reads it back with the
// database's clock, and a row not seen for outbox.NodeRetention is pruned by the next beat.
func TestNodesBeatAndList(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	nodes := e.store.Nodes()
	started := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	first := core.NodeBeat{Node: "n1", Queues: []core.NodeQueue{{Queue: "emails", InUse: 2, Cap: 8}, {Queue: "jobs", Cap: core.Unlimited}},
		Version: "v1.2.3", StartedAt: started, Every: 5 * time.Second}
	if err := nodes.Beat(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Beat(ctx, core.NodeBeat{Node: "old", StartedAt: started, Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	second := first
	second.Queues = []core.NodeQueue{{Queue: "emails", InUse: 1, Cap: 8}}
	second.Stopped = true
	if err := nodes.Beat(ctx, second); err != nil {
		t.Fatal(err)
	}
	list, now, err := nodes.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Node != "n1" {
		t.Fatalf("List = %+v; want n1 (seen last) then old", list)
	}
	got := list[0]
	if !reflect.DeepEqual(got.Queues, second.Queues) || got.Version != "v1.2.3" || !got.Stopped ||
		got.Every != 5*time.Second || !got.StartedAt.Equal(started) {
		t.Errorf("row of n1 = %+v; want the second beat %+v", got, second)
	}
	if got.LastSeen.IsZero() || got.LastSeen.After(now) {
		t.Errorf("LastSeen %v, database now %v; want a database stamp at or before now", got.LastSeen, now)
	}

	table := pgx.Identifier{e.schema, "txmq_nodes"}.Sanitize()
	if _, err := e.pool.Exec(ctx, `UPDATE `+table+` SET last_seen = now() - interval '1 millisecond' * $1 WHERE node = 'old'`, (outbox.NodeRetention + time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Beat(ctx, first); err != nil {
		t.Fatal(err)
	}
	if list, _, err = nodes.List(ctx); err != nil || len(list) != 1 || list[0].Node != "n1" || list[0].Stopped {
		t.Fatalf("after the prune List = %+v, %v; want n1 alone, running again", list, err)
	}
	if err := nodes.Beat(ctx, core.NodeBeat{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("a beat without a node id: %v; want ErrInvalidConfig", err)
	}
}

// TestNodeHeartbeat: a node given the store's Nodes writes its row at Start with the queues
// it listens to and their caps, and a last row marked stopped at Close.
func TestNodeHeartbeat(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg, "beats", txmq.QueueConfig[msg]{Transactional: txmq.Never, MaxConcurrentBatches: txmq.Cap(3)}))
	ex := must(txmq.DeclareIn(reg, "solo", txmq.QueueConfig[msg]{Transactional: txmq.Never, Exclusive: true}))
	be := memory.New(nil) // delivers, unlike e.be: the beats carry what the node ran
	t.Cleanup(func() { _ = be.Close() })
	node := must(txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Heartbeats: e.store.Nodes()}))
	noop := func(context.Context, []msg) error { return nil }
	if err := q.Listen(node, noop); err != nil {
		t.Fatal(err)
	}
	if err := ex.Listen(node, noop); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := []core.NodeQueue{{Queue: "beats", Cap: 3}, {Queue: "solo", Cap: 1, Limit: 1}} // Exclusive: a cluster-wide limit of 1
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, _, err := e.store.Nodes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			if b := list[0]; b.Node != node.ID() || !reflect.DeepEqual(b.Queues, want) || b.Stopped || b.Every <= 0 {
				t.Fatalf("heartbeat = %+v; want node %s listening to %+v, running", b, node.ID(), want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat row after Start (rows %+v)", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What the node ran travels in its beats, per minute, for the dashboard's cluster chart.
	if err := q.PublishMany(ctx, node, []msg{{}, {}}); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		h := node.RunHistory("beats")
		return len(h) > 0 && h[len(h)-1].Messages+h[max(len(h)-2, 0)].Messages == 2
	}, "the two messages run")
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	list, _, err := e.store.Nodes().List(ctx) // Close waits for the last beat
	if err != nil || len(list) != 1 || !list[0].Stopped {
		t.Fatalf("after Close rows = %+v, %v; want the node's row marked stopped", list, err)
	}
	var ran int64
	for _, nq := range list[0].Queues {
		for _, m := range nq.Minutes {
			if nq.Queue != "beats" || m.Batches == 0 {
				t.Errorf("the last beat carries minute %+v of queue %s; want runs of beats only", m, nq.Queue)
			}
			ran += m.Messages
		}
	}
	if ran != 2 {
		t.Fatalf("the last beat says %d messages of beats ran; want 2 (%+v)", ran, list[0].Queues)
	}
}

// TestHaltedNodeRowGoesStale: a halted node (a simulated crash, txmqtest.Halt) writes no last
// row marked stopped: its row stays as the last beat left it, to go stale as a killed
// process's does.
func TestHaltedNodeRowGoesStale(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg, "halted-beats", txmq.QueueConfig[msg]{Transactional: txmq.Never}))
	node := must(txmq.NewNode(e.be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Heartbeats: e.store.Nodes()}))
	if err := q.Listen(node, func(context.Context, []msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		list, _, err := e.store.Nodes().List(ctx)
		return err == nil && len(list) == 1
	}, "the node's first heartbeat row")
	txmqtest.Halt(node) // returns once the node's loops ended
	list, _, err := e.store.Nodes().List(ctx)
	if err != nil || len(list) != 1 || list[0].Stopped {
		t.Fatalf("after Halt rows = %+v, %v; want the node's row still running (no last write)", list, err)
	}
}
