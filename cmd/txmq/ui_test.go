package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestUIAnswersOnlyItsHost runs `txmq ui` without auth: it answers to its --listen address,
// the loopback names on its port and the --allow-host names, and 421 to any other Host (a
// DNS-rebinding page's).
func TestUIAnswersOnlyItsHost(t *testing.T) {
	t.Parallel()
	pgURL := testenv.PostgresURL(t)
	schema := testenv.PostgresSchema(t, testenv.PostgresPool(t))
	db := []string{"--database-url", pgURL, "--schema", schema}
	var out bytes.Buffer
	if code := run(context.Background(), append([]string{"migrate"}, db...), &out, &out); code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", code, out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- run(ctx, append([]string{"ui", "--listen", "127.0.0.1:0", "--allow-host", "proxy.example,Other.Example:9999"}, db...), pw, &errOut)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("txmq ui: exit %d\n%s", code, errOut.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("txmq ui printed no address: %v\n%s", err, errOut.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	u, err := url.Parse(strings.Fields(strings.TrimPrefix(line, "txmq ui: serving "))[0])
	if err != nil || u.Port() == "" {
		t.Fatalf("txmq ui: %q: no URL with a port", line)
	}
	for _, tt := range []struct {
		host string
		want int
	}{
		{u.Host, http.StatusOK},
		{"localhost:" + u.Port(), http.StatusOK},
		{"proxy.example", http.StatusOK},
		{"proxy.example:443", http.StatusOK},
		{"other.example:9999", http.StatusOK},
		{"other.example", http.StatusMisdirectedRequest},
		{"rebind.evil.example:" + u.Port(), http.StatusMisdirectedRequest},
		{"localhost:1", http.StatusMisdirectedRequest},
	} {
		req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
		req.Host = tt.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET / with Host %s: %d, want %d\n%s", tt.host, resp.StatusCode, tt.want, body)
		}
		if tt.want == http.StatusMisdirectedRequest && !strings.Contains(string(body), "--allow-host") {
			t.Errorf("the 421 for Host %s does not say how to allow a name: %s", tt.host, body)
		}
	}
}
