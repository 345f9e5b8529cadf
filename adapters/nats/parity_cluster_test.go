//go:build natscluster

package nats

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// This file is built only with -tags natscluster, so that a plain `go test ./adapters/nats`
// stays quick. CI runs it as a step of its own (scripts/test: after the main go test step, not
// beside the other suites, but beside the SQS suite and then chaos, which run one after the
// other while it runs):
//
//	go test -race -count=1 -timeout 20m -tags natscluster -run '^TestParityCluster$' ./adapters/nats
//
// It takes about 2 minutes (114 properties, four at a time, on the shared 2-core machine; 3
// minutes two at a time) and appends parity[nats-cluster] to TXMQ_PARITY_SUMMARY like every
// TestParity. Its cluster is
// three nats-server processes built from the module (natstest.ClusterURL), so a cluster that
// cannot start fails the test, on CI=true as anywhere; TXMQ_NATS_CLUSTER_URL names an outside
// cluster instead, which fails when unreachable on CI=true (skips elsewhere).
//
// What the cluster showed, fixed in the adapter rather than hidden by wider bounds: nats-server
// serves info requests (stream and consumer info) only when no other API request is queued
// (jetstream_api.go: "infos are deprioritized"), a missing stream's "not found" comes only from
// the meta leader, a request about a stream or consumer that has no leader yet gets no answer
// at all, and a consumer listing waits up to 4 s for every consumer's leader. So a Backend's
// first use of a queue that looked its stream up before creating it outlasted the 4 s Timeout
// while other properties' R3 creations kept the meta leader busy (a publish without an outbox
// was lost: delivery/isolated_queues, budget/*, transactions/rollback_publishes_nothing failed
// about one run in two), and a Depths racing its own client's creations always did
// (contract/concurrent_calls_one_client). Streams and consumers are now created first (a create
// with the same config answers with the existing one) and Depths waits for its own client's
// setups; three runs in a row then passed 0 failed.
//
// TestParityCluster runs the shared conformance suite against a 3-node JetStream cluster (the
// nats-server processes of natstest.ClusterURL, or TXMQ_NATS_CLUSTER_URL) with every stream and
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
// lease is 2 s (1 s single-server), as on the Redis Cluster; 4 properties at a time (8
// single-server): every property creates R3 streams and consumers, each a Raft group of its own
// on the three nodes, whose creation the meta leader serialises, so a property spends seconds
// waiting on it, not on the CPU (the suite uses about half a core). Two at a time took 3
// minutes. Six at a time failed under stress-ng --cpu 2 with other suites running beside it
// (load 8 on 2 cores): delivery/published_set never got its first 200 messages, as when the
// first flush's stream creation waits behind five other properties' creations past the
// client's 4 s Timeout (a publish without an outbox is then dropped, as designed); four at a
// time keeps the meta leader's queue short enough.
func (clusterHarness) Capabilities() parity.Caps {
	return parity.Caps{MaxMessageSize: 1 << 20, Lease: 2 * time.Second, DueTolerance: 3 * time.Second, Parallel: 4}
}

func (clusterHarness) Open(t *testing.T) parity.Env {
	raw := natstest.ClusterURL(t)
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
	if opts.Replicas != 3 || strings.Count(servers, ",") != natstest.ClusterSize-1 {
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
