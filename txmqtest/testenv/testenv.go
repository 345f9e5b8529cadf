package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// Default endpoints, used when the environment variable is unset.
const (
	// DefaultPostgresURL is the local PostgreSQL (trust auth, database "test").
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	// DefaultPgBouncerURL is a local PgBouncer (its standard port) in transaction pooling
	// mode in front of the local PostgreSQL; scripts/services.sh starts one and sets
	// TXMQ_PGBOUNCER_URL.
	DefaultPgBouncerURL = "postgres://postgres@127.0.0.1:6432/test?sslmode=disable"
	// DefaultRedisURL is the local Redis.
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	// DefaultSQSEndpoint is the local SQS emulator (fauxqs).
	DefaultSQSEndpoint = "http://127.0.0.1:4566"
)

// pingTimeout bounds each service ping.
const pingTimeout = 3 * time.Second

var (
	pingMu    sync.Mutex
	pingCache = map[string]error{}
)

// Required reports whether a missing service must fail the test instead of skipping it
// (CI=true or TXMQ_REQUIRE_SERVICES=1).
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("TXMQ_REQUIRE_SERVICES") == "1"
}

// PostgresURL returns the PostgreSQL URL for tests (TXMQ_POSTGRES_URL or the default), after
// checking once per process that it answers; otherwise it skips or fails t (see Required).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return resolve(t, "PostgreSQL", "TXMQ_POSTGRES_URL", DefaultPostgresURL, pingPostgres)
}

// PgBouncerURL returns the URL of a PgBouncer in transaction pooling mode in front of the
// test PostgreSQL (TXMQ_PGBOUNCER_URL or the default), after checking once per process that it
// answers; otherwise it skips or fails t (see Required).
func PgBouncerURL(t testing.TB) string {
	t.Helper()
	return resolve(t, "PgBouncer", "TXMQ_PGBOUNCER_URL", DefaultPgBouncerURL, pingPostgres)
}

// RedisURL returns the Redis URL for tests (TXMQ_REDIS_URL or the default), after checking once
// per process that it answers PING; otherwise it skips or fails t (see Required).
func RedisURL(t testing.TB) string {
	t.Helper()
	return resolve(t, "Redis", "TXMQ_REDIS_URL", DefaultRedisURL, pingRedis)
}

// SQSEndpoint returns the SQS endpoint for tests (TXMQ_SQS_ENDPOINT or the default), after
// checking once per process that it answers; otherwise it skips or fails t (see Required).
func SQSEndpoint(t testing.TB) string {
	t.Helper()
	return resolve(t, "SQS", "TXMQ_SQS_ENDPOINT", DefaultSQSEndpoint, pingSQS)
}

// UniqueName returns prefix followed by 12 random lowercase hex characters, a valid SQL
// identifier and queue-name suffix (for example a per-test schema "txmq_t_3f9a...").
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// resolve returns the endpoint of a service: the environment variable's or the default when it
// answers; else, in a build with the docker tag and a Docker engine, a container started
// once per process; else it skips or fails t (see Required).
func resolve(t testing.TB, service, envName, def string, ping func(context.Context, string) error) string {
	t.Helper()
	u := env(envName, def)
	if pingOnce(service, u, ping) == nil {
		return u
	}
	if start := containerStarters[service]; start != nil {
		if cu, err := startContainerOnce(service, start); err == nil {
			Check(t, service, envName, cu, ping)
			return cu
		} else {
			t.Logf("testenv: %s: no container either: %v", service, err)
		}
	}
	Check(t, service, envName, u, ping)
	return u
}

func env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// pingOnce pings u once per process and remembers the answer.
func pingOnce(service, u string, ping func(context.Context, string) error) error {
	key := service + "\x00" + u
	pingMu.Lock()
	defer pingMu.Unlock()
	err, done := pingCache[key]
	if !done {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		err = ping(ctx, u)
		cancel()
		pingCache[key] = err
	}
	return err
}

// Check pings a service once per process (cached) and skips the test when it does not answer,
// or fails it when Required.
func Check(t testing.TB, service, envName, u string, ping func(context.Context, string) error) {
	t.Helper()
	err := pingOnce(service, u, ping)
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s not reachable at %s (set %s to point elsewhere): %v", service, redact(u), envName, err)
	if Required() {
		t.Fatalf("%s; CI=true or TXMQ_REQUIRE_SERVICES=1 make this a failure", msg)
	}
	t.Skip(msg)
}

func redact(u string) string { return core.Redact(u) }

func pingPostgres(ctx context.Context, u string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// pingRedis speaks just enough RESP for AUTH, SELECT-free PING, so this package needs no
// Redis client.
func pingRedis(ctx context.Context, u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	host := p.Host
	if p.Port() == "" {
		host = net.JoinHostPort(p.Hostname(), "6379")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	cmd := func(args ...string) (string, error) {
		var sb strings.Builder
		fmt.Fprintf(&sb, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(sb.String())); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		return strings.TrimSpace(line), err
	}
	if pw, ok := p.User.Password(); ok {
		args := []string{"AUTH", pw}
		if name := p.User.Username(); name != "" {
			args = []string{"AUTH", name, pw}
		}
		if reply, err := cmd(args...); err != nil || !strings.HasPrefix(reply, "+") {
			return fmt.Errorf("redis AUTH: %q %v", reply, err)
		}
	}
	reply, err := cmd("PING")
	if err != nil {
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("redis PING answered %q", reply)
	}
	return nil
}

func pingSQS(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("GET /health: %s", resp.Status)
	}
	return nil
}

// WithParams returns raw with the query parameters kv (name, value, name, value, ...) set.
func WithParams(t testing.TB, raw string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
