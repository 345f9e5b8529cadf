// Package draintest holds the scenarios of a backend swap (package drain) that run on real
// backends from those backends' own tests: RollingDeploy. Each adapter module runs it against
// its server (the Redis module from SQL jobs to Redis); package drain runs it on memory. It
// is a test kit, for tests only.
package draintest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// RollingDeploy runs a rolling deploy on an old and a primary backend: a drain node starts,
// sees the old backend empty and declares it drained; then a node not restarted yet (on the
// old backend only, publishing, listening to nothing) keeps publishing every 300 ms for a few
// seconds. Every message, old and new, must be delivered without restarting anything, and
// the old backend must end drained again. The drain wrapper consumes old through oldClient,
// the node on the old setting publishes through oldPublisher (each process has its own client;
// they may be the same value for an in-process backend).
func RollingDeploy(t *testing.T, primary, oldClient, oldPublisher core.Backend, opts drain.Options) {
	t.Helper()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, testenv.UniqueName("rolling"), txmq.QueueConfig[string]{Transactional: txmq.Never})
	opts.Logger = txmqtest.TestLogger(t)
	d := drain.New(primary, []core.Backend{oldClient}, &opts)
	t.Cleanup(func() { _ = d.Close() })
	db := d.(*drain.Backend)
	rec := txmqtest.NewRecorder(func(s string) string { return s })
	node := txmqtest.StartNode(t, d, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 50 * time.Millisecond})
	if err := rec.Listen(q, node, func(context.Context, []string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool { return len(db.Draining()) == 0 }, "the drain node declares the empty old backend drained")

	oldNode := txmqtest.StartNode(t, oldPublisher, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	var want []string
	sent := map[string]time.Time{}
	for i := range 12 {
		for _, p := range []struct {
			n   *txmq.Node
			key string
		}{{oldNode, fmt.Sprint("old-", i)}, {node, fmt.Sprint("new-", i)}} {
			want = append(want, p.key)
			sent[p.key] = time.Now()
			if err := q.Publish(context.Background(), p.n, p.key); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	txmqtest.Eventually(t, 30*time.Second, func() bool { return rec.HasAll(want) }, func() string {
		missing, _ := rec.Diff(want)
		return fmt.Sprintf("every message delivered without a restart; missing %v", missing)
	})
	var worst time.Duration
	for k, at := range sent {
		if strings.HasPrefix(k, "old-") {
			worst = max(worst, rec.FirstSeen(k).Sub(at))
		}
	}
	t.Logf("rolling deploy: %d messages from the node on the old setting after the old backend was drained, all delivered; slowest after %v (RecheckInterval %v)",
		len(sent)/2, worst.Round(time.Millisecond), opts.RecheckInterval)
	if err := oldNode.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 30*time.Second, func() bool { return len(db.Draining()) == 0 }, "the old backend drained again")
	txmqtest.WaitIdle(t, node)
}
