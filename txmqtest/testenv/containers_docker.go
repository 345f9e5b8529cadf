//go:build docker && unix

package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// With the docker tag, a service that does not answer locally is started in a Docker container
// once per test process, through the docker command (so that no module needs a Docker client
// library): `docker run -d --rm` with the service's port published on a free loopback port,
// then pinged until it answers. A watcher process removes the containers once the test process
// has exited, as testcontainers' reaper did.
func init() {
	containerStarters["PostgreSQL"] = func(ctx context.Context) (string, error) {
		hostPort, err := dockerRun(ctx, "5432", "-e", "POSTGRES_HOST_AUTH_METHOD=trust", "-e", "POSTGRES_DB=test", "postgres:15-alpine")
		if err != nil {
			return "", err
		}
		u := "postgres://postgres@" + hostPort + "/test?sslmode=disable"
		return u, waitReady(ctx, "postgres:15-alpine", u, pingPostgres)
	}
	containerStarters["Redis"] = func(ctx context.Context) (string, error) {
		hostPort, err := dockerRun(ctx, "6379", "redis:7-alpine")
		if err != nil {
			return "", err
		}
		u := "redis://" + hostPort + "/0"
		return u, waitReady(ctx, "redis:7-alpine", u, pingRedis)
	}
	containerStarters["SQS"] = func(ctx context.Context) (string, error) {
		hostPort, err := dockerRun(ctx, "4566", "node:20-alpine", "npx", "--yes", "fauxqs@1.9.2")
		if err != nil {
			return "", err
		}
		u := "http://" + hostPort
		return u, waitReady(ctx, "node:20-alpine (fauxqs)", u, pingSQS)
	}
}

// dockerRun starts a container from args (options, image, command), publishing its port on
// a free loopback port, and returns that host:port.
func dockerRun(ctx context.Context, port string, args ...string) (string, error) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return "", fmt.Errorf("no docker command on the PATH: %w", err)
	}
	run := append([]string{"run", "-d", "--rm", "--label", "txmq.testenv.pid=" + strconv.Itoa(os.Getpid()),
		"-p", "127.0.0.1::" + port}, args...)
	out, err := exec.CommandContext(ctx, docker, run...).Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w%s", strings.Join(run, " "), err, stderrOf(err))
	}
	id := strings.TrimSpace(string(out))
	reapAtExit(docker, id)
	out, err = exec.CommandContext(ctx, docker, "port", id, port+"/tcp").Output()
	if err != nil {
		return "", fmt.Errorf("docker port %s %s/tcp: %w%s", id, port, err, stderrOf(err))
	}
	hostPort, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n") // IPv4 first
	return strings.TrimSpace(hostPort), nil
}

// reapAtExit starts a process of its own session that waits for this test process to exit,
// then removes container id. It inherits no descriptor of ours but the null device.
func reapAtExit(docker, id string) {
	const script = `while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" rm -f "$3" >/dev/null 2>&1`
	cmd := exec.Command("/bin/sh", "-c", script, "txmq-testenv-reaper", strconv.Itoa(os.Getpid()), docker, id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// waitReady pings u until it answers or ctx ends.
func waitReady(ctx context.Context, what, u string, ping func(context.Context, string) error) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err := ping(pctx, u)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s at %s did not answer: %w", what, redact(u), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stderrOf returns ": " and the stderr of a failed command, if any.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
