package ui_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

// dashboard serves a dashboard on a fresh schema with opts (Store filled in).
func dashboard(t *testing.T, opts ui.Options) (*httptest.Server, *outbox.Store) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	opts.Store, opts.Backend = app.Store, app.Backend
	h, err := ui.Handler(&opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, app.Store
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestChangesNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	if err := store.Pauses().Pause(context.Background(), "emails", "test"); err != nil { // listed, with a Resume form
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	code, page := get(t, c, srv.URL+"/")
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET /: %d, no CSRF field in:\n%s", code, page)
	}
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/queues/emails/resume", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(url.Values{"csrf": {"0123456789abcdef0123456789abcdef"}}, ""); code != http.StatusForbidden {
		t.Fatalf("POST with a wrong token: %d, want 403", code)
	}
	if code := post(url.Values{"csrf": {m[1]}}, "http://evil.example"); code != http.StatusForbidden {
		t.Fatalf("POST from another origin: %d, want 403", code)
	}
	if names, _ := store.Pauses().Paused(context.Background()); len(names) != 1 {
		t.Fatalf("a refused POST changed the pause marks: %v", names)
	}
	if code := post(url.Values{"csrf": {m[1]}, "back": {"//evil.example/"}}, srv.URL); code != http.StatusSeeOther {
		t.Fatalf("POST with the token: %d, want 303", code)
	}
	if names, _ := store.Pauses().Paused(context.Background()); len(names) != 0 {
		t.Fatalf("the resume did not happen: %v", names)
	}
}

func TestReadOnlyAndAuth(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{ReadOnly: true, User: "ops", Password: "s3cret-pw"})
	if err := store.Pauses().Pause(context.Background(), "emails", "test"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, http.DefaultClient, srv.URL+"/"); code != http.StatusUnauthorized {
		t.Fatalf("GET without credentials: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.SetBasicAuth("ops", "s3cret-pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusOK || strings.Contains(page, "<form method=\"post\"") || !strings.Contains(page, "read-only") || strings.Contains(page, "s3cret") {
		t.Fatalf("read-only page: %d, want 200 without change forms, marked read-only, without the password:\n%s", resp.StatusCode, page)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/queues/emails/resume", strings.NewReader("csrf=x"))
	req.SetBasicAuth("ops", "s3cret-pw")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST on a read-only dashboard: %d, want 403", resp.StatusCode)
	}
}

func TestHandlerNeedsAStore(t *testing.T) {
	t.Parallel()
	if _, err := ui.Handler(&ui.Options{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Fatalf("Handler without a store: %v; want an error naming Options.Store", err)
	}
}

// TestMessagesPage: through ForApp, the Messages page looks a message up by id through the
// memory backend's native lookup, lists messages by queue, state and time range, refuses a
// bad filter with a clear error, and cancels a message with a CSRF-checked POST.
func TestMessagesPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	queue := testenv.UniqueName("uimsg")
	q := txmq.MustDeclareIn(reg, queue, txmq.QueueConfig[string]{Transactional: txmq.Try})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://" + testenv.UniqueName("uimsg"), DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg, FlushWindow: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	// No listener runs: the messages stay delayed in the backend.
	if err := q.PublishMany(ctx, app.Node, []string{"a", "b"}, txmq.IDs("m-1", "m-2"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h, err := ui.ForApp(app, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}

	var page string
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		_, page = get(t, c, srv.URL+"/messages?id=m-2")
		return strings.Contains(page, `id="message"`)
	}, "m-2 shown")
	for _, want := range []string{"<dd>m-2</dd>", ">" + queue + "</a>", `<dd class="state">delayed</dd>`, "<dt>Due</dt>", `id="cancel"`, `href="./messages"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page of m-2 lacks %q:\n%s", want, page)
		}
	}
	for _, tt := range []struct {
		query string
		want  []string // substrings of the page
		not   []string
	}{
		{"queue=" + queue, []string{`data-id="m-1"`, `data-id="m-2"`}, nil},
		{"queue=" + queue + "&state=delayed&limit=1", []string{`data-id="m-2"`}, []string{`data-id="m-1"`}},
		{"queue=" + queue + "&state=queued", []string{"No messages match."}, []string{`data-id="m-`}},
		{"queue=" + queue + "&until=1h", []string{"No messages match."}, []string{`data-id="m-`}},
		{"queue=" + queue + "&since=2000-01-01T00:00:00Z&until=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), []string{`data-id="m-1"`, `data-id="m-2"`}, nil},
		{"state=sleeping", []string{`class="err">state &#34;sleeping&#34;`}, []string{`id="messages"`}},
		{"since=yesterday", []string{`class="err">since &#34;yesterday&#34;: use an RFC 3339 time`}, nil},
		{"limit=-3", []string{`class="err">limit &#34;-3&#34;`}, nil},
		{"id=nope", []string{"class=\"err\">" + txmq.ErrMessageNotFound.Error()}, []string{`id="message"`}},
	} {
		code, page := get(t, c, srv.URL+"/messages?"+tt.query)
		if code != http.StatusOK {
			t.Errorf("GET /messages?%s: %d", tt.query, code)
		}
		for _, w := range tt.want {
			if !strings.Contains(page, w) {
				t.Errorf("GET /messages?%s lacks %q:\n%s", tt.query, w, page)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(page, w) {
				t.Errorf("GET /messages?%s has %q:\n%s", tt.query, w, page)
			}
		}
	}

	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the page of m-2")
	}
	_, page = get(t, c, srv.URL+"/messages?id=m-1")
	resp, err := c.PostForm(srv.URL+"/messages/cancel", url.Values{"csrf": {m[1]}, "id": {"m-1"}, "back": {"messages?id=m-1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "cancelled message m-1 (queue "+queue) {
		t.Fatalf("cancel m-1: %d, want the message page saying it was cancelled:\n%s", resp.StatusCode, b)
	}
	if _, err := app.Inspector().Get(ctx, "m-1"); !errors.Is(err, txmq.ErrMessageNotFound) {
		t.Errorf("Get m-1 after the dashboard's cancel: %v; want ErrMessageNotFound (taken out of its batch)", err)
	}
	if got, err := app.Inspector().Get(ctx, "m-2"); err != nil || got.State != core.StateDelayed {
		t.Errorf("m-2 after cancelling m-1: %+v, %v", got, err)
	}
}

// opaqueBackend hides the memory backend's native lookup.
type opaqueBackend struct{ txmq.Backend }

// TestMessagesPageWithoutLookup: with no ledger and a backend that cannot look up, the page
// shows the Inspector's error (ErrLookupUnsupported) with status 200, and a cancel says why
// it did nothing; read-only mode hides and refuses the cancel.
func TestMessagesPageWithoutLookup(t *testing.T) {
	t.Parallel()
	for _, readOnly := range []bool{false, true} {
		srv, store := dashboard(t, ui.Options{ReadOnly: readOnly, Inspector: txmq.NewInspector(nil, opaqueBackend{memory.New(nil)})})
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		for _, query := range []string{"id=m-1", "queue=emails"} {
			code, page := get(t, c, srv.URL+"/messages?"+query)
			if code != http.StatusOK || !strings.Contains(page, `class="err">`+txmq.ErrLookupUnsupported.Error()) || !strings.Contains(page, "opaqueBackend") {
				t.Errorf("read-only %v: GET /messages?%s: %d; want 200 with the lookup error naming the backend:\n%s", readOnly, query, code, page)
			}
		}
		// No form on the Messages page carries the session's CSRF token: take it from the
		// queues page's Resume form.
		if err := store.Pauses().Pause(context.Background(), "emails", "test"); err != nil {
			t.Fatal(err)
		}
		_, page := get(t, c, srv.URL+"/")
		var tok string
		if m := csrfField.FindStringSubmatch(page); m != nil {
			tok = m[1]
		}
		if readOnly {
			resp, err := c.PostForm(srv.URL+"/messages/cancel", url.Values{"csrf": {"x"}, "id": {"m-1"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("cancel on a read-only dashboard: %d, want 403", resp.StatusCode)
			}
			continue
		}
		if tok == "" {
			t.Fatalf("no CSRF token on the queues page:\n%s", page)
		}
		resp, err := c.PostForm(srv.URL+"/messages/cancel", url.Values{"csrf": {tok}, "id": {"m-1"}, "back": {"messages?id=m-1"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "failed: message m-1 not cancelled: "+txmq.ErrLookupUnsupported.Error()) {
			t.Errorf("cancel without lookup: %d; want the page saying why:\n%s", resp.StatusCode, b)
		}
	}
}
