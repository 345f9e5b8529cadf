package ui_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

// hostStatus returns the status of GET / on srv with Host host.
func hostStatus(t *testing.T, srv *httptest.Server, host string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAllowedHosts: AllowedHosts adds names ("name" on any port, "name:port" on that port);
// the others still get 421.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	srv, _ := dashboard(t, ui.Options{AllowedHosts: []string{"Proxy.Example", "other.example:8443", "[::2]:80"}})
	for host, want := range map[string]int{
		"proxy.example":      http.StatusOK,
		"PROXY.example:1234": http.StatusOK,
		"other.example:8443": http.StatusOK,
		"other.example":      http.StatusMisdirectedRequest,
		"[::2]":              http.StatusOK,
		"[::2]:81":           http.StatusMisdirectedRequest,
		"evil.example":       http.StatusMisdirectedRequest,
	} {
		if got := hostStatus(t, srv, host); got != want {
			t.Errorf("Host %s: %d, want %d", host, got, want)
		}
	}
}

// TestForAppHostCheck: ForApp does not check the Host by default (the app's auth and routing
// stand in front of it), and does with HostCheckOn; Handler's HostCheckOff turns it off.
func TestForAppHostCheck(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://" + testenv.UniqueName("uihost"), DatabaseURL: testenv.PostgresURL(t), Schema: schema, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	serve := func(opts *ui.Options) *httptest.Server {
		h, err := ui.ForApp(app, opts)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	if got := hostStatus(t, serve(nil), "app.example.com"); got != http.StatusOK {
		t.Errorf("ForApp(nil), Host app.example.com: %d, want 200", got)
	}
	on := serve(&ui.Options{HostCheck: ui.HostCheckOn, AllowedHosts: []string{"app.example.com"}})
	if got := hostStatus(t, on, "app.example.com"); got != http.StatusOK {
		t.Errorf("ForApp with HostCheckOn, Host app.example.com (allowed): %d, want 200", got)
	}
	if got := hostStatus(t, on, "rebind.evil.example"); got != http.StatusMisdirectedRequest {
		t.Errorf("ForApp with HostCheckOn, Host rebind.evil.example: %d, want 421", got)
	}
	srv, _ := dashboard(t, ui.Options{HostCheck: ui.HostCheckOff})
	if got := hostStatus(t, srv, "anything.example"); got != http.StatusOK {
		t.Errorf("Handler with HostCheckOff, Host anything.example: %d, want 200", got)
	}
	srv, _ = dashboard(t, ui.Options{HostCheck: ui.HostCheckOn, User: "ops", Password: "pw"})
	if got := hostStatus(t, srv, "anything.example"); got != http.StatusMisdirectedRequest {
		t.Errorf("Handler with HostCheckOn and auth, Host anything.example: %d, want 421", got)
	}
}

// TestSigningKeyIsShared: two dashboards given one SigningKey (two processes behind a load
// balancer) accept each other's tokens; a dashboard with its own random key does not.
func TestSigningKeyIsShared(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("k"), 32)
	a, store := dashboard(t, ui.Options{SigningKey: key})
	b, _ := dashboard(t, ui.Options{SigningKey: key})
	c, _ := dashboard(t, ui.Options{})
	s := newSession(t, a.URL, store)
	for _, tt := range []struct {
		srv  *httptest.Server
		want int
	}{{c, http.StatusForbidden}, {b, http.StatusSeeOther}} {
		req, _ := http.NewRequest(http.MethodPost, tt.srv.URL+"/queues/emails/resume", strings.NewReader(url.Values{"csrf": {s.token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(s.cookie)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("POST to %s with a token of %s: %d, want %d", tt.srv.URL, a.URL, resp.StatusCode, tt.want)
		}
	}
}

// TestOptionsAreChecked: a malformed AllowedHosts entry, a short SigningKey and an unknown
// HostCheck are refused with ErrInvalidConfig naming the setting.
func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	_, store := dashboard(t, ui.Options{})
	for _, tt := range []struct {
		opts ui.Options
		want string
	}{
		{ui.Options{AllowedHosts: []string{"http://proxy.example/"}}, "Options.AllowedHosts"},
		{ui.Options{AllowedHosts: []string{""}}, "Options.AllowedHosts"},
		{ui.Options{SigningKey: []byte("short")}, "Options.SigningKey"},
		{ui.Options{HostCheck: 7}, "Options.HostCheck"},
	} {
		tt.opts.Store = store
		if _, err := ui.Handler(&tt.opts); !errors.Is(err, txmq.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Handler(%+v): %v; want ErrInvalidConfig naming %s", tt.opts, err, tt.want)
		}
	}
}
