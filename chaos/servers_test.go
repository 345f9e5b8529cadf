package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// need skips the test when a program the suite starts is missing, or fails it when services
// are required (CI=true or TXMQ_REQUIRE_SERVICES=1): CI must never turn a missing program into
// a green run.
func need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("chaos: %s: %v (scripts/services.sh installs it)", what, err)
	if testenv.Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// freePort returns a TCP port nothing listens on at the moment.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// service is a backend or database process the suite can pause, crash and restart on the same
// port and data directory. Its processes belong to the test that started it.
type service struct {
	t    testing.TB
	spec procSpec
	mu   sync.Mutex
	p    *proc
}

func startService(t testing.TB, spec procSpec) *service {
	t.Helper()
	return &service{t: t, spec: spec, p: mustStart(t, spec)}
}

func (s *service) proc() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// pause freezes every process of the service (SIGSTOP).
func (s *service) pause() { s.proc().signal(syscall.SIGSTOP) }

// resume thaws them (SIGCONT).
func (s *service) resume() { s.proc().signal(syscall.SIGCONT) }

// crash kills every process of the service with SIGKILL and waits for them to exit.
func (s *service) crash() { s.proc().kill() }

// restart starts the service again with the same command (port, data directory). It may be
// called from any goroutine.
func (s *service) restart() error {
	p, err := startProc(s.t, s.spec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// tempDir makes a directory the postgres user can use too (t.TempDir's parents are 0700), removed
// in t.Cleanup.
func tempDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// postgresBin finds the newest PostgreSQL server binaries (initdb, postgres).
func postgresBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi < vj
	})
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no initdb under /usr/lib/postgresql/*/bin or on PATH")
}

// postgresCred is the user PostgreSQL runs as: postgres when the test runs as root (initdb and
// postgres refuse root), else the current user.
func postgresCred(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Getuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	need(t, "a postgres user to run a throwaway PostgreSQL as (initdb refuses root)", err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// startPostgres creates a throwaway cluster (trust auth, on 127.0.0.1 and a free port, its
// socket in its own directory) and starts it. fsync is off: the suite crashes processes, not
// the machine, and the page cache survives a process crash; synchronous_commit stays on, so a
// commit the client saw survives kill -9 of the whole cluster.
func startPostgres(t testing.TB, name string) (*service, string) {
	t.Helper()
	bin, err := postgresBin()
	need(t, "PostgreSQL server binaries", err)
	cred := postgresCred(t)
	dir := tempDir(t, "txmq-chaos-pg-")
	data := filepath.Join(dir, "data")
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb %s: %v\n%s", data, err, out)
	}
	port := freePort(t)
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", port)
	return startService(t, procSpec{
		name: name, path: filepath.Join(bin, "postgres"), cred: cred, dir: dir,
		args: []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
			"-c", "max_connections=300", "-c", "shared_buffers=32MB"},
		ready: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, u)
			if err != nil {
				return err
			}
			return c.Close(ctx)
		},
	}), u
}

// startRedis starts redis-server on a free port with its data in its own directory: with
// aof, every write is in the append-only file before Redis answers (appendonly yes,
// appendfsync always); without, Redis keeps nothing across a restart.
func startRedis(t testing.TB, name string, aof bool) (*service, string) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	need(t, "redis-server", err)
	dir := tempDir(t, "txmq-chaos-redis-")
	port := freePort(t)
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no"}
	if aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	u := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	return startService(t, procSpec{name: name, path: path, args: args, dir: dir,
		ready: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
			defer c.Close()
			return c.Ping(ctx).Err()
		},
	}), u
}

// startNATS starts nats-server v2.15 (this test binary in the nats-server role, so the server
// is the module go.mod pins) with JetStream storing in its own directory; syncAlways fsyncs
// every write (sync_interval: always), otherwise the server's default applies (every 2 min).
func startNATS(t testing.TB, name string, syncAlways bool) (*service, string) {
	t.Helper()
	dir := tempDir(t, "txmq-chaos-nats-")
	port := freePort(t)
	env := []string{roleEnv + "=nats-server", "CHAOS_NATS_PORT=" + strconv.Itoa(port), "CHAOS_NATS_DIR=" + dir}
	if syncAlways {
		env = append(env, "CHAOS_NATS_SYNC=always")
	}
	return startService(t, procSpec{name: name, path: os.Args[0], args: []string{"-test.run=^$"}, env: env}),
		fmt.Sprintf("nats://127.0.0.1:%d", port)
}
