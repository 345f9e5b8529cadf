package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// RedisClusterURL returns the Redis Cluster URL for tests (TXMQ_REDIS_CLUSTER_URL, in the redis
// adapter's form redis+cluster://host1:port1,host2:port2,.../), after checking once per process
// that one of its nodes answers CLUSTER INFO with cluster_state:ok; otherwise it skips or fails
// t (see Required). There is no default: scripts/services.sh starts a cluster of three masters
// and three replicas on loopback and exports the variable; unset, the test skips (fails in CI).
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	u := env("TXMQ_REDIS_CLUSTER_URL", "")
	if u == "" {
		msg := "Redis Cluster: TXMQ_REDIS_CLUSTER_URL is not set (source scripts/services.sh to start a local cluster)"
		if Required() {
			t.Fatalf("%s; CI=true or TXMQ_REQUIRE_SERVICES=1 make this a failure", msg)
		}
		t.Skip(msg)
	}
	Check(t, "Redis Cluster", "TXMQ_REDIS_CLUSTER_URL", u, pingRedisCluster)
	return u
}

// RedisClusterAddrs returns the host:port seed addresses of a redis+cluster:// URL (the hosts
// of its authority, separated by commas; port 6379 when omitted).
func RedisClusterAddrs(u string) ([]string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, h := range strings.Split(p.Host, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6379")
		}
		addrs = append(addrs, h)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no host in %s", redact(u))
	}
	return addrs, nil
}

// pingRedisCluster asks the URL's nodes, in turn, for CLUSTER INFO until one answers
// cluster_state:ok.
func pingRedisCluster(ctx context.Context, u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	addrs, err := RedisClusterAddrs(u)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range addrs {
		info, err := clusterInfo(ctx, a, p.User)
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if err == nil {
			err = errors.New("cluster_state is not ok")
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	return errors.Join(errs...)
}

// clusterInfo speaks just enough RESP for AUTH and CLUSTER INFO on one node.
func clusterInfo(ctx context.Context, addr string, user *url.Userinfo) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	send := func(args ...string) error {
		var sb strings.Builder
		fmt.Fprintf(&sb, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
		_, err := conn.Write([]byte(sb.String()))
		return err
	}
	if pw, ok := user.Password(); ok {
		args := []string{"AUTH", pw}
		if name := user.Username(); name != "" {
			args = []string{"AUTH", name, pw}
		}
		if err := send(args...); err != nil {
			return "", err
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+") {
			return "", fmt.Errorf("redis AUTH: %q %v", strings.TrimSpace(line), err)
		}
	}
	if err := send("CLUSTER", "INFO"); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("CLUSTER INFO answered %q (is cluster-enabled yes?)", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return "", fmt.Errorf("CLUSTER INFO answered %q", line)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
