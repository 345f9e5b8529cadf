package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ClusterNode is one nats-server process of a Cluster, on a fixed client port with its own
// configuration and store in its directory. Kill and Start keep both, as a real crash and
// restart do.
type ClusterNode struct {
	// Name is the node's server_name (n1, n2, ...).
	Name string

	bin  string
	port int
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// URL returns the node's client URL, nats://127.0.0.1:PORT; it stays the same across restarts.
func (n *ClusterNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// Start starts the node's process (again) and waits until it accepts connections; it is a
// no-op while the process runs. Its output goes to nats.log in the node's directory.
func (n *ClusterNode) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(n.dir, "nats.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, "-c", filepath.Join(n.dir, "nats.conf"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting nats-server %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-done:
			n.cmd = nil
			return fmt.Errorf("nats-server %s exited at start (see %s)", n.Name, filepath.Join(n.dir, "nats.log"))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server %s does not accept connections after 30s: %w", n.Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends the node's process with SIGKILL (a crash: nothing is flushed or handed over) and
// waits for it to exit.
func (n *ClusterNode) Kill() { n.signal(syscall.SIGKILL) }

// Stop ends the node's process with SIGTERM (a clean shutdown) and waits for it to exit,
// killing it after 10 s.
func (n *ClusterNode) Stop() { n.signal(syscall.SIGTERM) }

func (n *ClusterNode) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.cmd = nil
}
