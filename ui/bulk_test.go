package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/txmq/txmq/ui"
)

// TestBulkCancelFromTheDashboard: the Messages list of one queue and a waiting state offers
// a cancel of every message it selects (all pages), refused until the queue's name is typed;
// a list it cannot cancel says why instead.
func TestBulkCancelFromTheDashboard(t *testing.T) {
	t.Parallel()
	srv, app := payloadDashboard(t, ui.Options{}, 60)
	s := newSession(t, srv.URL, app.Store)
	if _, page := s.do(http.MethodGet, "/messages", nil, nil); strings.Contains(page, `id="cancel-where"`) || !strings.Contains(page, `id="bulk-note"`) {
		t.Fatalf("the unfiltered list offers a bulk cancel, or does not say how to get one:\n%s", page)
	}
	if _, page := s.do(http.MethodGet, "/messages?queue=orders&state=delayed", nil, nil); !strings.Contains(page, `id="cancel-where"`) {
		t.Fatalf("the delayed messages of orders have no bulk cancel form:\n%s", page)
	}
	post := func(confirm string) string {
		t.Helper()
		resp, body := s.do(http.MethodPost, "/messages/cancel-where", url.Values{"csrf": {s.token}, "queue": {"orders"}, "state": {"delayed"}, "confirm": {confirm}, "back": {"messages?queue=orders&state=delayed"}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /messages/cancel-where: %d, want 303: %s", resp.StatusCode, body)
		}
		ref, _ := url.Parse(resp.Header.Get("Location"))
		_, page := s.do(http.MethodGet, (&url.URL{Path: "/messages/cancel-where"}).ResolveReference(ref).String(), nil, nil)
		return page
	}
	if page := post("order"); !strings.Contains(page, "not cancelled: type the queue name") {
		t.Fatalf("an unconfirmed bulk cancel:\n%s", page)
	}
	if d, _ := app.Backend.Depths(context.Background(), []string{"orders"}); d["orders"].Delayed != 60 {
		t.Fatalf("delayed after the refused cancel: %+v; want 60", d["orders"])
	}
	if page := post("orders"); !strings.Contains(page, "cancelled 60 delayed message(s) of orders (0 skipped") {
		t.Fatalf("a confirmed bulk cancel:\n%s", page)
	}
	if d, _ := app.Backend.Depths(context.Background(), []string{"orders"}); d["orders"].Delayed != 0 {
		t.Fatalf("delayed after the bulk cancel: %+v; want 0", d["orders"])
	}
}

// TestRunNowFromTheDashboard: the Messages list of one queue's delayed messages offers to run
// them now, refused until the queue's name is typed; then the backend holds them ready.
func TestRunNowFromTheDashboard(t *testing.T) {
	t.Parallel()
	srv, app := payloadDashboard(t, ui.Options{}, 5)
	s := newSession(t, srv.URL, app.Store)
	if _, page := s.do(http.MethodGet, "/messages?queue=orders&state=delayed", nil, nil); !strings.Contains(page, `id="run-now"`) {
		t.Fatalf("the delayed messages of orders have no run-now form:\n%s", page)
	}
	if _, page := s.do(http.MethodGet, "/messages?queue=orders&state=queued", nil, nil); strings.Contains(page, `id="run-now"`) {
		t.Fatalf("the queued messages of orders offer to run now:\n%s", page)
	}
	post := func(confirm string) string {
		t.Helper()
		resp, body := s.do(http.MethodPost, "/messages/run-now", url.Values{"csrf": {s.token}, "queue": {"orders"}, "state": {"delayed"}, "confirm": {confirm}, "back": {"messages?queue=orders&state=delayed"}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /messages/run-now: %d, want 303: %s", resp.StatusCode, body)
		}
		ref, _ := url.Parse(resp.Header.Get("Location"))
		_, page := s.do(http.MethodGet, (&url.URL{Path: "/messages/run-now"}).ResolveReference(ref).String(), nil, nil)
		return page
	}
	if page := post(""); !strings.Contains(page, "not run: type the queue name") {
		t.Fatalf("an unconfirmed run now:\n%s", page)
	}
	if page := post("orders"); !strings.Contains(page, "made 5 delayed message(s) of orders due now (0 skipped") {
		t.Fatalf("a confirmed run now:\n%s", page)
	}
	if d, _ := app.Backend.Depths(context.Background(), []string{"orders"}); d["orders"].Delayed != 0 || d["orders"].Ready != 5 {
		t.Fatalf("depths after run now: %+v; want 5 ready", d["orders"])
	}
}
