package natstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartProcess starts one nats-server process with JetStream (ServerBinary: the same v2.15
// build as a Cluster's nodes, outside the test process) for one test or benchmark, stops it in
// t.Cleanup, and returns its client URL once it serves JetStream. It is the single server to
// compare a Cluster with: the same binary, the same kind of process, one node instead of three.
func StartProcess(t testing.TB) string {
	t.Helper()
	n, err := startProcess(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: starting a nats-server process: %v", err)
	}
	t.Cleanup(n.Stop)
	return n.URL()
}

func startProcess(dir string) (*ClusterNode, error) {
	bin, err := ServerBinary()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	n := &ClusterNode{Name: "single", bin: bin, port: ports[0], dir: dir}
	conf := fmt.Sprintf("server_name: single\nlisten: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n", n.port, filepath.Join(dir, "store"))
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := n.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := pingNATS(ctx, n.URL())
		cancel()
		if err == nil {
			return n, nil
		}
		if time.Now().After(deadline) {
			n.Stop()
			return nil, fmt.Errorf("nats-server at %s does not serve JetStream after 30s: %w (log in %s)", n.URL(), err, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
