package nats

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
)

// burnClusterRounds is how many rounds BenchmarkBurnDownCluster runs, each the single server
// then the cluster.
const burnClusterRounds = 3

// BenchmarkBurnDownCluster is the engine's burn-down (see BenchmarkBurnDown) on a 3-node
// JetStream cluster with the queue's stream and consumer replicated on all three
// (txmq_replicas=3, the URL form users write) vs one nats-server process of the same build,
// in interleaved rounds (single/N then cluster_r3/N), so that their ratio is measured under
// the same load. Run it as -benchtime 20000x (b.N counts messages). Every node is a process of
// its own on this machine: this measures the cost of replication, not the scale-out of
// servers on machines of their own.
func BenchmarkBurnDownCluster(b *testing.B) {
	single := natstest.StartProcess(b)
	u, err := url.Parse(natstest.ClusterURL(b) + "?txmq_replicas=3")
	if err != nil {
		b.Fatal(err)
	}
	opts, servers, err := parseURL(u)
	if err != nil {
		b.Fatalf("parseURL(%s): %v", u, err)
	}
	opts.Timeout = 5 * time.Second
	for r := range burnClusterRounds {
		b.Run(fmt.Sprintf("single/%d", r+1), func(b *testing.B) { burnTxmq(b, single, &Options{Timeout: opts.Timeout}) })
		b.Run(fmt.Sprintf("cluster_r3/%d", r+1), func(b *testing.B) {
			o := *opts
			burnTxmq(b, servers, &o)
		})
	}
}
