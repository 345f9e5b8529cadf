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

// TestFairFigure is the figure behind "fair share on vs off" in docs/performance.md, run by
// hand as one process per measurement (farm-bench pairs the two settings):
//
//	TXMQ_FAIR_FIGURE=memory:// TXMQ_FAIR=on TXMQ_FAIR_BATCH=100 go test -run TestFairFigure ./adapters/all
//
// It publishes TXMQ_FAIR_N messages (default 50000) to a fresh queue whose MaxBatchMessages is
// TXMQ_FAIR_BATCH (default 1), spread over TXMQ_FAIR_KEYS fairness keys (default 10) in turn
// when TXMQ_FAIR=on (a Fair queue) and without keys otherwise, then runs them with a listener
// that does nothing, 50 batches at a time; the process's wall time is the figure. Skipped
// unless TXMQ_FAIR_FIGURE names a backend URL.
func TestFairFigure(t *testing.T) {
	url := os.Getenv("TXMQ_FAIR_FIGURE")
	if url == "" {
		t.Skip("TXMQ_FAIR_FIGURE names the backend URL of the fair share figure")
	}
	num := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	n, batch, keys := num("TXMQ_FAIR_N", 50000), num("TXMQ_FAIR_BATCH", 1), num("TXMQ_FAIR_KEYS", 10)
	on := os.Getenv("TXMQ_FAIR") == "on"
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, fmt.Sprintf("fair-fig-%d", time.Now().UnixNano()), txmq.QueueConfig[int]{
		Transactional:        txmq.Never,
		MaxBatchMessages:     batch,
		Fair:                 on,
		MaxConcurrentBatches: txmq.Cap(50),
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: url, Node: txmq.NodeOptions{Registry: reg, FetchMax: 50}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	var done atomic.Int64
	all := make(chan struct{})
	if err := q.Listen(app.Node, func(_ context.Context, msgs []int) error {
		if done.Add(int64(len(msgs))) == int64(n) {
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
			opts = append(opts, txmq.FairKey(fmt.Sprint("tenant-", i%keys)))
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
