package natstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterSize is the number of nodes StartCluster and ClusterURL start: the smallest cluster
// where an R3 stream survives the loss of one node.
const ClusterSize = 3

// Cluster is ClusterSize nats-server processes (ServerBinary: the module's v2.15, built
// without the race detector) forming one JetStream cluster on 127.0.0.1: each node has its
// own client port, cluster (route) port and store directory, and routes to the others. The
// nodes do not advertise each other's client URLs (no_advertise), so a client uses only the
// servers its URL names: a test can put proxies in front of them, and cutting those is an
// outage.
type Cluster struct {
	// Nodes are the servers, in start order.
	Nodes []*ClusterNode
}

// StartCluster starts a cluster for one test and stops it in t.Cleanup; it returns once the
// cluster is ready (see startCluster).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: starting a nats cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// startCluster starts the nodes in dir and waits until the cluster takes R3 streams through
// every node (see ready).
func startCluster(dir string) (*Cluster, error) {
	bin, err := ServerBinary()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * ClusterSize)
	if err != nil {
		return nil, err
	}
	routes := make([]string, ClusterSize)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[ClusterSize+i])
	}
	c := &Cluster{}
	for i := range ClusterSize {
		n := &ClusterNode{
			Name: fmt.Sprintf("n%d", i+1), bin: bin, port: ports[i],
			dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
		}
		conf := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
cluster {
  name: txmq
  listen: "127.0.0.1:%d"
  no_advertise: true
  routes: [%s]
}
`, n.Name, n.port, filepath.Join(n.dir, "store"), ports[ClusterSize+i], strings.Join(routes, ", "))
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(n.dir, "nats.conf"), []byte(conf), 0o644); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.ready(60 * time.Second); err != nil {
		c.Shutdown()
		return nil, fmt.Errorf("%w (node logs in %s)", err, dir)
	}
	return c, nil
}

// ready waits until every node accepts clients and, through each node in turn, an R3 stream
// can be created, published to, consumed from by an R3 consumer and deleted: the meta leader
// is elected, knows every peer as online (it places R3 streams only on servers it has heard
// from), and API requests and pulls route from every node. Tests should not meet a cluster
// still forming.
func (c *Cluster) ready(d time.Duration) error {
	deadline := time.Now().Add(d)
	for i, n := range c.Nodes {
		var err error
		for {
			if err = probe(n.URL(), fmt.Sprintf("txmq_probe_%d", i)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the cluster does not serve R%d streams through node %s after %v: %w", ClusterSize, n.Name, d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// probe creates an R3 stream and consumer through the server at u, publishes a message and
// pulls it, and deletes the stream.
func probe(u, name string) error {
	nc, err := natsgo.Connect(u, natsgo.Timeout(2*time.Second), natsgo.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: ClusterSize})
	if err != nil {
		return fmt.Errorf("creating stream: %w", err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckExplicitPolicy, Replicas: ClusterSize})
	if err != nil {
		return fmt.Errorf("creating consumer: %w", err)
	}
	if _, err := js.Publish(ctx, name+".x", []byte("probe")); err != nil {
		return fmt.Errorf("publishing: %w", err)
	}
	mb, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return fmt.Errorf("pulling: %w", err)
	}
	got := 0
	for m := range mb.Messages() {
		got++
		_ = m.DoubleAck(ctx)
	}
	if got == 0 {
		if err := mb.Error(); err != nil {
			return fmt.Errorf("pulling: %w", err)
		}
		return fmt.Errorf("pulling: no message")
	}
	return nil
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
		wg.Go(n.Stop)
	}
	wg.Wait()
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

// sharedCluster is the cluster ClusterURL starts once per test binary.
var sharedCluster shared

// ClusterURL returns the nats://a,b,c URL of one 3-node JetStream cluster started once for the
// whole test binary (TXMQ_NATS_CLUSTER_URL, when set, names an outside cluster instead,
// checked once to answer with JetStream). StopSharedNATS stops it.
func ClusterURL(t testing.TB) string {
	t.Helper()
	if u, ok := outsideURL(t, "NATS cluster", "TXMQ_NATS_CLUSTER_URL"); ok {
		return u
	}
	return sharedCluster.url(t, "txmq-nats-cluster-", func(dir string) (string, func(), error) {
		c, err := startCluster(dir)
		if err != nil {
			return "", nil, err
		}
		return c.URL(), c.Shutdown, nil
	})
}
