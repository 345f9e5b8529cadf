package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one process the suite started, in a process group of its own so that a signal
// reaches the whole server (PostgreSQL's postmaster and its backends alike).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	mu     sync.Mutex
	out    strings.Builder // stdout and stderr, for a failure report
	lines  []string        // stdout lines
	exited time.Time
	err    error
}

// procSpec says how to start a process and when it is ready.
type procSpec struct {
	name string
	path string
	args []string
	env  []string            // added to os.Environ()
	cred *syscall.Credential // run as another user (PostgreSQL refuses root)
	dir  string              // working directory, default the test's
	// ready, if set, is polled until it returns nil; otherwise the process is ready when it
	// prints a line starting with "ready".
	ready func() error
}

// mustStart is startProc failing the test on error; call it from the test's goroutine only.
func mustStart(t testing.TB, s procSpec) *proc {
	t.Helper()
	p, err := startProc(t, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProc starts a process and waits (up to a minute) until it is ready; the process is
// killed in t.Cleanup if it still runs. It may be called from any goroutine.
func startProc(t testing.TB, s procSpec) (*proc, error) {
	p := &proc{name: s.name, cmd: exec.Command(s.path, s.args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), s.env...)
	p.cmd.Dir = s.dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.name, err)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if s.ready == nil && strings.HasPrefix(line, "ready") {
				readyOnce.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exited, p.err = time.Now(), err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if r := p.firstRace(); r != "" {
				t.Logf("%s reported a data race; the first report:\n%s", p.name, r)
			}
			t.Logf("%s output (last 4 KiB):\n%s", p.name, p.tail(4096))
		}
	})
	if s.ready != nil {
		go func() {
			for {
				select {
				case <-p.done:
					return
				default:
				}
				if s.ready() == nil {
					readyOnce.Do(func() { close(ready) })
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited at start: %v\n%s", s.name, p.exitErr(), p.tail(4096))
	case <-time.After(time.Minute):
		p.kill()
		return nil, fmt.Errorf("%s not ready after 1m\n%s", s.name, p.tail(4096))
	}
}

// Write collects stderr.
func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// firstRace returns the race detector's first report in the output (its stacks are longer
// than the tail printed on a failure), or "" if there is none.
func (p *proc) firstRace() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	i := strings.Index(s, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, "\n=================="); j >= 0 {
		s = s[:j]
	}
	return s
}

// line returns the last stdout line starting with prefix, or "".
func (p *proc) line(prefix string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.lines[i], prefix) {
			return p.lines[i]
		}
	}
	return ""
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *proc) exitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// tree returns the process and its descendants, parents first. A process group is not
// enough: PostgreSQL's backends leave the postmaster's group (setsid).
func (p *proc) tree() []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	out := []int{p.cmd.Process.Pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// signal sends sig to the process and its descendants: parents first for SIGSTOP and SIGKILL
// (so no new child escapes), children first otherwise.
func (p *proc) signal(sig syscall.Signal) []int {
	pids := p.tree()
	if sig != syscall.SIGSTOP && sig != syscall.SIGKILL {
		slices.Reverse(pids)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return pids
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// kill is kill -9 of the process and its descendants; it returns when they have exited. A
// no-op on an exited process.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	pids := p.signal(syscall.SIGKILL)
	<-p.done
	// A restart on the same data directory needs the old processes gone.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// stop sends sig to the process (not its group) and waits up to timeout for it to exit,
// then kills it. It reports whether the process exited on its own.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		p.kill()
		return false
	}
}
