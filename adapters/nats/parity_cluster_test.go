//go:build natscluster

package nats

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testenv"
	"github.com/txmq/txmq/internal/testenv/natsenv"
	"github.com/txmq/txmq/parity"
)

// This file is built only with -tags natscluster, so CI does not run it yet: the suite passes
// on the cluster (78 of 78 supported properties, on the shared 2-core machine at a load average
// of 12 to 16 from other work), but takes about 140 s at two properties at a time, over the
// 90 s budget for one CI suite; at four at a time it takes about 90 s and, at that load, 1 to
// 5 properties failed in each run (3 at a time: 106 s, 1 failed): JetStream API calls then
// took longer than the 4 s Timeout, so a publish without an outbox was dropped (core's rule for
// ErrBackendUnavailable: the stream lookup of a Backend's first publish to a queue timed out)
// or a Depths call failed. The calls that timed out were info requests (stream and consumer
// info), which nats-server serves only when no other API request is queued (jetstream_api.go:
// "infos are deprioritized"), behind the R3 creations and deletions of every running property;
// running the nodes with GOMAXPROCS=8 (more API workers) did not help. With main's ordering
// merged (93 properties), two runs at two at a time, load average 8 to 12: 89 and 91 of 92
// supported passed in about 170 s; contract/concurrent_calls_one_client failed in both (a
// Depths stream info over the 4 s Timeout while the same client creates the stream; it also
// fails about one run in two alone), and budget/exact_while_receives_are_held and
// policy/poison_worker_lost_dead_lettered in the first (both pass alone). Run it with
//
//	go test -race -tags natscluster -run 'TestParityCluster$' ./adapters/nats
//
// TestParityCluster runs the shared conformance suite against a 3-node JetStream cluster (the
// nats-server processes of natsenv.ClusterURL, or TXMQ_NATS_CLUSTER_URL) with every stream and
// consumer replicated on all three (txmq_replicas=3), through a URL in the form users write:
// nats://a,b,c. Each property gets its own stream prefix and one TCP proxy per node; the URL
// names the proxies, and the nodes do not advertise their own addresses, so Break (every proxy
// cuts its connections and refuses new ones) is an outage of that property's clients only.
func TestParityCluster(t *testing.T) { parity.Run(t, clusterHarness{}) }

type clusterHarness struct{}

func (clusterHarness) Name() string { return "nats-cluster" }

// Capabilities: a delayed batch becomes ready when the stream leader fires its schedule and
// the ready message is replicated through the stream's Raft group, so DueTolerance is 3 s
// (2 s single-server); every settle, extension and pull goes through a Raft leader too, so the
// lease is 2 s (1 s single-server), as on the Redis Cluster; 2 properties at a time, since
// every property creates R3 streams and consumers, each a Raft group of its own on the three
// nodes, and their creation is serialised by the meta leader.
func (clusterHarness) Capabilities() parity.Caps {
	return parity.Caps{MaxMessageSize: 1 << 20, Lease: 2 * time.Second, DueTolerance: 3 * time.Second, Parallel: 2}
}

func (clusterHarness) Open(t *testing.T) parity.Env {
	raw := natsenv.ClusterURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("NATS cluster URL: %v", err)
	}
	var proxies []*testenv.Proxy
	var hosts []string
	for _, h := range strings.Split(u.Host, ",") {
		p := testenv.NewProxy(t, h)
		proxies = append(proxies, p)
		hosts = append(hosts, p.Addr())
	}
	pu := url.URL{Scheme: "nats", User: u.User, Host: strings.Join(hosts, ","), RawQuery: "txmq_replicas=3"}
	e := &clusterEnv{url: pu.String(), direct: raw, prefix: testenv.UniqueName("p"), proxies: proxies}
	t.Cleanup(func() { deleteStreams(t, e.direct, e.prefix) })
	return e
}

type clusterEnv struct {
	url, direct, prefix string
	proxies             []*testenv.Proxy
}

func (e *clusterEnv) Backend(t *testing.T) core.Backend {
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	opts, servers, err := parseURL(u)
	if err != nil {
		t.Fatalf("parseURL(%s): %v", e.url, err)
	}
	if opts.Replicas != 3 || strings.Count(servers, ",") != natsenv.ClusterSize-1 {
		t.Fatalf("parseURL(%s): replicas %d, servers %q; want 3 and one per node", e.url, opts.Replicas, servers)
	}
	opts.Prefix, opts.Timeout = e.prefix, 4*time.Second // under parity.UnavailableBound
	be, err := New(servers, opts)
	if err != nil {
		t.Fatalf("nats.New: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

func (e *clusterEnv) Break(*testing.T) {
	for _, p := range e.proxies {
		p.Break()
	}
}

func (e *clusterEnv) Restore(*testing.T) {
	for _, p := range e.proxies {
		p.Restore()
	}
}
