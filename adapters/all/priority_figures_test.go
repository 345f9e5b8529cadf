package all_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/all"
)

// TestPriorityFigure is the figure behind "priorities on vs off" in docs/performance.md, run
// by hand as one process per measurement (farm-bench pairs the two settings):
//
//	TXMQ_PRIO_FIGURE=redis://127.0.0.1:6379/0 TXMQ_PRIO=on go test -run TestPriorityFigure ./adapters/all
//
// It publishes TXMQ_PRIO_N messages (default 5000), one per batch, to a fresh queue, priorities
// 0..9 in turn (0..TXMQ_PRIO_LEVELS-1) when TXMQ_PRIO=on (a Prioritized queue) and none otherwise, then runs them with
// a listener that does nothing, 50 batches at a time; the process's wall time is the figure.
// Skipped unless TXMQ_PRIO_FIGURE names a backend URL.
func TestPriorityFigure(t *testing.T) {
	url := os.Getenv("TXMQ_PRIO_FIGURE")
	if url == "" {
		t.Skip("TXMQ_PRIO_FIGURE names the backend URL of the priority figure")
	}
	n := 5000
	if s := os.Getenv("TXMQ_PRIO_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	on := os.Getenv("TXMQ_PRIO") == "on"
	mod := 10
	if s := os.Getenv("TXMQ_PRIO_LEVELS"); s != "" {
		mod, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, fmt.Sprintf("prio-fig-%d", time.Now().UnixNano()), txmq.QueueConfig[int]{
		Transactional:        txmq.Never,
		MaxBatchMessages:     1,
		Prioritized:          on,
		MaxConcurrentBatches: txmq.Cap(50),
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: url, Node: txmq.NodeOptions{Registry: reg, FetchMax: 50}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	var done atomic.Int64
	all := make(chan struct{})
	if err := q.Listen(app.Node, func(context.Context, []int) error {
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range n {
		var opts []txmq.PublishOption
		if on {
			opts = append(opts, txmq.Priority(i%mod))
		}
		if err := q.Publish(ctx, app.Node, i, opts...); err != nil {
			t.Fatal(err)
		}
	}
	published := time.Since(start)
	defer func() { t.Logf("published in %v, all ran in %v", published, time.Since(start)) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		t.Fatalf("%d of %d ran", done.Load(), n)
	}
}
