package natsenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/internal/testenv"
)

// ClusterSize is the number of nodes StartCluster and ClusterURL start: the smallest cluster
// where an R3 stream survives the loss of one node.
const ClusterSize = 3

// Cluster is ClusterSize embedded nats-servers (v2.15) forming one JetStream cluster on
// 127.0.0.1: each node has its own client port, cluster (route) port and store directory, and
// routes to the others. The nodes do not advertise each other's client URLs (NoAdvertise), so a
// client uses only the servers its URL names: a test can put proxies in front of them, and
// cutting those is an outage.
type Cluster struct {
	// Nodes are the servers, in start order; Shutdown and Restart of one node keep its ports
	// and store, as a real restart does.
	Nodes []*NATSServer
}

// StartCluster starts a cluster for one test and shuts it down in t.Cleanup; it returns once
// JetStream has a meta leader, so streams can be created.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(t, t.TempDir())
	if err != nil {
		t.Fatalf("testenv: starting an embedded nats cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

func startCluster(t testing.TB, dir string) (*Cluster, error) {
	ports, err := freePorts(2 * ClusterSize)
	if err != nil {
		return nil, err
	}
	routes := make([]*url.URL, ClusterSize)
	for i := range routes {
		routes[i] = &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", ports[ClusterSize+i])}
	}
	c := &Cluster{}
	for i := range ClusterSize {
		opts := server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			NoLog:      true,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name:        "txmq",
				Host:        "127.0.0.1",
				Port:        ports[ClusterSize+i],
				NoAdvertise: true,
			},
			Routes: routes,
		}
		c.Nodes = append(c.Nodes, &NATSServer{t: t, opts: opts})
	}
	// Start the nodes together: a node waits for its routes before it is ready.
	var wg sync.WaitGroup
	errs := make([]error, ClusterSize)
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.waitJetStream(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	if err := c.probe(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// probe creates and deletes an R3 stream until that works: a meta leader is elected a moment
// before the cluster takes stream assignments, and the first property must not meet that.
func (c *Cluster) probe(d time.Duration) error {
	nc, err := natsgo.Connect(c.URL(), natsgo.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "txmq_probe", Subjects: []string{"txmq_probe.>"}, Replicas: ClusterSize, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(ctx, "txmq_probe")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream does not create an R%d stream after %v: %w", ClusterSize, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL returns the cluster's client URL in the form users write, nats://h1:p1,h2:p2,h3:p3.
func (c *Cluster) URL() string {
	hosts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hosts[i] = strings.TrimPrefix(n.URL(), "nats://")
	}
	return "nats://" + strings.Join(hosts, ",")
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Shutdown)
	}
	wg.Wait()
}

// waitJetStream waits until every running node reports JetStream clustered with a meta leader.
func (c *Cluster) waitJetStream(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ready := true
		for _, n := range c.Nodes {
			n.mu.Lock()
			srv := n.srv
			n.mu.Unlock()
			if srv == nil {
				continue
			}
			if !srv.JetStreamIsClustered() || !metaLeaderKnown(srv) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream has no meta leader after %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metaLeaderKnown reports whether srv knows the JetStream meta leader.
func metaLeaderKnown(srv *server.Server) bool {
	jsz, err := srv.Jsz(&server.JSzOptions{})
	return err == nil && jsz.Meta != nil && jsz.Meta.Leader != ""
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (listened on and closed again).
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

var (
	sharedClusterOnce sync.Once
	sharedCluster     *Cluster
	sharedClusterErr  error
	sharedClusterDir  string
)

// ClusterURL returns the nats://a,b,c URL of one embedded 3-node JetStream cluster started once
// for the whole test binary (TXMQ_NATS_CLUSTER_URL, when set, names an outside cluster
// instead, checked once to answer with JetStream). StopSharedNATS removes it.
func ClusterURL(t testing.TB) string {
	t.Helper()
	if u := strings.TrimSpace(os.Getenv("TXMQ_NATS_CLUSTER_URL")); u != "" {
		testenv.Check(t, "NATS cluster", "TXMQ_NATS_CLUSTER_URL", u, pingNATS)
		return u
	}
	sharedClusterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "txmq-nats-cluster-")
		if err != nil {
			sharedClusterErr = err
			return
		}
		sharedClusterDir = dir
		sharedCluster, sharedClusterErr = startCluster(t, dir)
	})
	if sharedClusterErr != nil {
		t.Fatalf("testenv: starting the shared embedded nats cluster: %v", sharedClusterErr)
	}
	return sharedCluster.URL()
}

// stopSharedCluster shuts the process-wide cluster down and removes its stores.
func stopSharedCluster() {
	if sharedCluster != nil {
		sharedCluster.Shutdown()
	}
	if sharedClusterDir != "" {
		_ = os.RemoveAll(sharedClusterDir)
	}
}
