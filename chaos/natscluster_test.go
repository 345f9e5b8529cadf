package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/adapters/nats/natstest"
)

// NATS cluster drill: three nats-server v2.15 nodes (natstest.StartCluster: separate processes
// of the module's server, file storage), every stream and consumer replicated on all three
// (txmq_replicas=3), the processes dialling nats://a,b,c. One scenario, kill-node: the node
// leading the work queue's stream is killed (SIGKILL) while the publisher publishes and the
// workers consume, with an Exclusive run in flight; it is started again after nodeDownFor on
// the same port and store. The fault lasts from the kill until the restarted node is a current
// replica of the work queue's stream again. JetStream acknowledges a publish or an ack once a
// majority of the replicas has it, so losing one node of three loses nothing acknowledged: the
// scenario is not lossy, and its figures are asserted like the single server's.

// nodeDownFor is how long the killed node stays down: longer than the lease, so claims whose
// consumer leader it was run out and come back through the new leader.
const nodeDownFor = 3 * time.Second

func natsClusterScenarios(t *testing.T) []scenarioRun {
	c := natstest.StartCluster(t)
	u := withParam(c.URL(), "txmq_replicas", "3")
	return []scenarioRun{{scenario{
		name:   "kill-node",
		inject: func(r *rig) ([]fault, error) { return killNATSNode(r, c) },
	}, nil, func(uniq string) string { return withParam(u, "txmq_prefix", uniq) }}}
}

// killNATSNode kills the node leading the work queue's stream (with an Exclusive run in
// flight), starts it again after nodeDownFor, and waits until every replica of the stream is
// current.
func killNATSNode(r *rig, c *natstest.Cluster) ([]fault, error) {
	var prefix string
	for _, e := range r.env {
		if v, ok := strings.CutPrefix(e, "CHAOS_BACKEND="); ok {
			if pu, err := url.Parse(v); err == nil {
				prefix = pu.Query().Get("txmq_prefix")
			}
		}
	}
	if prefix == "" {
		return nil, errors.New("kill-node: no txmq_prefix in CHAOS_BACKEND")
	}
	nc, err := natsgo.Connect(c.URL(), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream := prefix + "_" + workQueue.Name()
	info := func() (*jetstream.StreamInfo, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		si := s.CachedInfo()
		if si.Cluster == nil || si.Cluster.Leader == "" {
			return nil, fmt.Errorf("stream %s has no leader", stream)
		}
		return si, nil
	}
	var si *jetstream.StreamInfo
	if err := waitFor(30*time.Second, func() (err error) { si, err = info(); return err }); err != nil {
		return nil, fmt.Errorf("kill-node: %w", err)
	}
	var victim *natstest.ClusterNode
	for _, n := range c.Nodes {
		if n.Name == si.Cluster.Leader {
			victim = n
		}
	}
	if victim == nil {
		return nil, fmt.Errorf("kill-node: the leader %q of stream %s is not a node of the cluster", si.Cluster.Leader, stream)
	}
	done, err := r.slowExclusive()
	if err != nil {
		return nil, err
	}
	defer done()
	r.t.Logf("chaos[nats-cluster/kill-node]: killing %s, the leader of stream %s", victim.Name, stream)
	start := time.Now()
	victim.Kill()
	var leader string
	if err := waitFor(30*time.Second, func() error {
		si, err := info()
		if err == nil && si.Cluster.Leader == victim.Name {
			err = errors.New("no new leader yet")
		}
		if err == nil {
			leader = si.Cluster.Leader
		}
		return err
	}); err != nil {
		return []fault{{start: start, end: time.Now()}}, fmt.Errorf("kill-node: no new leader of %s within 30s: %w", stream, err)
	}
	r.t.Logf("chaos[nats-cluster/kill-node]: %s leads %s %v after the kill", leader, stream, time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Until(start.Add(nodeDownFor)))
	if err := victim.Start(); err != nil {
		return []fault{{start: start, end: time.Now()}}, fmt.Errorf("kill-node: restarting %s: %w", victim.Name, err)
	}
	err = waitFor(60*time.Second, func() error {
		si, err := info()
		if err != nil {
			return err
		}
		for _, p := range si.Cluster.Replicas {
			if p.Offline || !p.Current {
				return fmt.Errorf("replica %s not current yet", p.Name)
			}
		}
		if len(si.Cluster.Replicas) != natstest.ClusterSize-1 {
			return fmt.Errorf("%d replicas besides the leader", len(si.Cluster.Replicas))
		}
		return nil
	})
	end := time.Now()
	if err != nil {
		return []fault{{start: start, end: end}}, fmt.Errorf("kill-node: %s not a current replica again within 60s: %w", victim.Name, err)
	}
	r.t.Logf("chaos[nats-cluster/kill-node]: %s current again %v after the kill", victim.Name, end.Sub(start).Round(time.Millisecond))
	return []fault{{start: start, end: end}}, nil
}
