package natstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/txmqtest/testenv"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServer is an embedded nats-server (v2.15, JetStream enabled) for tests, on 127.0.0.1 and
// a free port, storing in its own directory. Shutdown and Restart keep the port and the store
// directory, so streams and consumers survive an outage the way they survive a real restart.
type NATSServer struct {
	t    testing.TB
	mu   sync.Mutex
	opts server.Options
	srv  *server.Server
	url  string
}

// StartNATS starts an embedded server for one test and shuts it down in t.Cleanup. configure,
// when given, adjusts the server options before the start (for example MaxPayload).
func StartNATS(t testing.TB, configure ...func(*server.Options)) *NATSServer {
	t.Helper()
	opts := embeddedOptions(t.TempDir())
	for _, c := range configure {
		c(&opts)
	}
	s := &NATSServer{t: t, opts: opts}
	if err := s.start(); err != nil {
		t.Fatalf("testenv: starting an embedded nats-server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func (s *NATSServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts // a copy: the server mutates its options
	srv, err := server.NewServer(&o)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("not ready for connections after 10s")
	}
	addr := srv.Addr().(*net.TCPAddr)
	s.opts.Port = addr.Port // keep the port across restarts
	s.srv = srv
	s.url = fmt.Sprintf("nats://127.0.0.1:%d", addr.Port)
	return nil
}

// URL returns the server's client URL (nats://127.0.0.1:PORT); it stays the same across
// Restart.
func (s *NATSServer) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Shutdown stops the server (a backend outage); clients see their connection drop and try to
// reconnect. Shutting down a stopped server is a no-op.
func (s *NATSServer) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts the server again on the same port with the same store directory; it fails
// the test if the server cannot start.
func (s *NATSServer) Restart() {
	s.t.Helper()
	s.mu.Lock()
	running := s.srv != nil
	s.mu.Unlock()
	if running {
		return
	}
	var err error
	for range 50 { // the port may take a moment to be free again
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("testenv: restarting the embedded nats-server: %v", err)
}

// sharedNATS is the server NATSURL starts once per test binary.
var sharedNATS shared

// NATSURL returns the NATS URL for tests. When TXMQ_NATS_URL is set it names an outside server
// (checked once per process to answer with JetStream; otherwise the test is skipped, or fails
// under CI=true / TXMQ_REQUIRE_SERVICES=1). Otherwise one nats-server v2.15 process (the
// module's own build, ServerBinary, as a Cluster's nodes) is started for the whole test binary
// and its URL returned; StopSharedNATS (from TestMain) removes it. It runs outside the test
// process so that the race detector checks txmq, not the server: an embedded v2.15.2 reported
// a data race inside the server (a stream update's filestore config against a concurrent
// consumer create), which failed every test running at the time. The machine's Debian
// nats-server 2.9 on :4222 is never used by default: it lacks message schedules and other
// features the adapter relies on.
func NATSURL(t testing.TB) string {
	t.Helper()
	if u, ok := outsideURL(t, "NATS", "TXMQ_NATS_URL"); ok {
		return u
	}
	return sharedNATS.url(t, "txmq-nats-", func(dir string) (string, func(), error) {
		n, err := startProcess(dir)
		if err != nil {
			return "", nil, err
		}
		return n.URL(), n.Stop, nil
	})
}

// embeddedOptions are the options of an embedded server storing in dir: 127.0.0.1, a free
// port, JetStream, no logs, no signal handlers.
func embeddedOptions(dir string) server.Options {
	return server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true}
}

// outsideURL returns the URL in the environment variable env, checked once per process to
// answer with JetStream (skipping the test, or failing it when services are required, if it
// does not), and whether the variable was set.
func outsideURL(t testing.TB, service, env string) (string, bool) {
	t.Helper()
	u := strings.TrimSpace(os.Getenv(env))
	if u == "" {
		return "", false
	}
	testenv.Check(t, service, env, u, pingNATS)
	return u, true
}

// shared is a server (or cluster) started once per test binary, in a temporary directory
// removed by close.
type shared struct {
	once sync.Once
	dir  string
	u    string
	stop func()
	err  error
}

// url starts the server with start (given a new directory named after pattern) on the first
// call and returns its URL; a failed start fails this and every later test that asks.
func (s *shared) url(t testing.TB, pattern string, start func(dir string) (string, func(), error)) string {
	t.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", pattern); s.err != nil {
			return
		}
		s.u, s.stop, s.err = start(s.dir)
	})
	if s.err != nil {
		t.Fatalf("testenv: starting the shared %s: %v", strings.TrimSuffix(pattern, "-"), s.err)
	}
	return s.u
}

// close stops the server, if it was started, and removes its directory.
func (s *shared) close() {
	if s.stop != nil {
		s.stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// StopSharedNATS stops the process-wide embedded server (NATSURL) and cluster (ClusterURL) and
// removes their stores; call it from TestMain after m.Run. It is a no-op when none was started.
func StopSharedNATS() {
	sharedCluster.close()
	sharedNATS.close()
}

func pingNATS(ctx context.Context, u string) error {
	nc, err := natsgo.Connect(u, natsgo.Timeout(2*time.Second), natsgo.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	return nil
}
