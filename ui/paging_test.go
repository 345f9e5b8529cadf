package ui_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

var (
	deadRow  = regexp.MustCompile(`<tr data-id="[0-9]+">`)
	nextLink = regexp.MustCompile(`<a href="([^"]+)" id="next-page">`)
)

// TestDeadLettersArePaged: the dead-letter list shows 50 a page, oldest first, with a link
// to the next page while there are more and one back to the first; nothing is capped.
func TestDeadLettersArePaged(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	const n = 120
	for i := range n {
		b := parity.EncodeBatch("paged", nil, json.RawMessage(`1`))
		if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: "paged", BatchID: b.ID, Body: b.Body,
			Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: i%3 + 1, Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	seen, pages := 0, 0
	for u := srv.URL + "/dead?queue=paged"; u != ""; pages++ {
		code, page := get(t, http.DefaultClient, u)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", u, code)
		}
		rows := len(deadRow.FindAllString(page, -1))
		seen += rows
		if pages > 0 && !strings.Contains(page, `id="first-page"`) {
			t.Errorf("page %d has no link to the first page", pages+1)
		}
		u = ""
		if m := nextLink.FindStringSubmatch(page); m != nil {
			if rows != 50 {
				t.Errorf("page %d: %d rows and a next page; want 50", pages+1, rows)
			}
			u = srv.URL + "/" + strings.TrimPrefix(html.UnescapeString(m[1]), "./")
		}
		if pages > 5 {
			t.Fatal("more pages than 120 dead letters make")
		}
	}
	if seen != n || pages != 3 {
		t.Fatalf("saw %d dead letters on %d pages; want %d on 3", seen, pages, n)
	}
}

// TestAutoRefresh: ?refresh=N (2 s to an hour) makes a page reload itself without JavaScript,
// to the page without its banner; the links turn it on and off; other values are ignored.
func TestAutoRefresh(t *testing.T) {
	t.Parallel()
	srv, _ := dashboard(t, ui.Options{})
	for _, tc := range []struct {
		path, meta, link string
	}{
		{"/", "", `id="refresh-on"`},
		{"/?refresh=5", `<meta http-equiv="refresh" content="5;url=./?refresh=5">`, `id="refresh-off"`},
		{"/dead?queue=q&refresh=30", `<meta http-equiv="refresh" content="30;url=./dead?queue=q&amp;refresh=30">`, `id="refresh-off"`},
		{"/?refresh=1", "", `id="refresh-on"`},
		{"/?refresh=x", "", `id="refresh-on"`},
	} {
		code, page := get(t, http.DefaultClient, srv.URL+tc.path)
		if code != http.StatusOK || !strings.Contains(page, tc.link) {
			t.Errorf("GET %s: %d, want the link %s:\n%s", tc.path, code, tc.link, page)
		}
		has := strings.Contains(page, `http-equiv="refresh"`)
		if tc.meta == "" && has || tc.meta != "" && !strings.Contains(page, tc.meta) {
			t.Errorf("GET %s: want meta %q:\n%s", tc.path, tc.meta, page[:min(len(page), 600)])
		}
	}
}

// TestReplayQueueFromTheDashboard: the dead-letter list of one queue has a form that replays
// every dead letter of it, and the banner says how many.
func TestReplayQueueFromTheDashboard(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	for range 3 {
		b := parity.EncodeBatch("bulk", nil, json.RawMessage(`1`))
		if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: "bulk", BatchID: b.ID, Body: b.Body,
			Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: 1, Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, srv.URL, store)
	if _, page := s.do(http.MethodGet, "/dead?queue=bulk", nil, nil); !strings.Contains(page, `id="replay-queue"`) {
		t.Fatalf("the dead letters of bulk have no replay form:\n%s", page)
	}
	resp, body := s.do(http.MethodPost, "/dead/replay", url.Values{"csrf": {s.token}, "queue": {"bulk"}, "back": {"dead?queue=bulk"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /dead/replay: %d, want 303: %s", resp.StatusCode, body)
	}
	ref, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	loc := (&url.URL{Path: "/dead/replay"}).ResolveReference(ref).String()
	if _, page := s.do(http.MethodGet, loc, nil, nil); !strings.Contains(page, "replayed 3 dead letter(s) of bulk with a fresh budget") {
		t.Fatalf("the page after the replay (%s) has no banner saying so:\n%s", loc, page)
	}
	if n, err := store.DeadLetterCounts(context.Background()); err != nil || n["bulk"] != 0 {
		t.Fatalf("dead letters of bulk after the replay: %v %v; want none left dead", n, err)
	}
}

// TestSchedulesPage: the Schedules page lists each schedule that published a tick, with its
// queue, last and next tick.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	if _, page := get(t, http.DefaultClient, srv.URL+"/schedules"); !strings.Contains(page, "No schedule has published a tick yet") {
		t.Fatalf("the empty Schedules page:\n%s", page)
	}
	tick := time.Now().UTC().Truncate(time.Second)
	earlier := tick.Add(-time.Hour)
	if ok, err := store.Ticks().ClaimTick(context.Background(), "nightly", "reports", earlier, tick, func(context.Context) error { return nil }); err != nil || !ok {
		t.Fatalf("ClaimTick: %v %v", ok, err)
	}
	if ok, err := store.Ticks().ClaimTick(context.Background(), "nightly", "reports", tick, tick.Add(time.Hour), func(context.Context) error { return nil }); err != nil || !ok {
		t.Fatalf("ClaimTick: %v %v", ok, err)
	}
	code, page := get(t, http.DefaultClient, srv.URL+"/schedules")
	recent := `<td class="recent">` + tick.Format(time.RFC3339) + `, ` + earlier.Format(time.RFC3339) + `</td>` // newest first
	for _, want := range []string{`<tr data-schedule="nightly">`, `queues/reports`, tick.Format(time.RFC3339), tick.Add(time.Hour).Format(time.RFC3339), recent, `<td class="spec">-</td>`} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("GET /schedules: %d, lacks %q:\n%s", code, want, page)
		}
	}
}

// TestNodesPage: the Nodes page lists each node's heartbeat with its queues, slots in use and
// caps (and a queue's cluster-wide limits), version and state: running, stopped (its last row) or stale (3 beats missed).
func TestNodesPage(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	if _, page := get(t, http.DefaultClient, srv.URL+"/nodes"); !strings.Contains(page, "No node has written a heartbeat yet") {
		t.Fatalf("the empty Nodes page:\n%s", page)
	}
	ctx := context.Background()
	started := time.Now().Add(-time.Hour)
	beats := []core.NodeBeat{
		{Node: "web-1", Queues: []core.NodeQueue{{Queue: "emails", InUse: 2, Cap: 8}, {Queue: "reports", InUse: 1, Cap: 1, Limit: 1}}, Version: "v1.4.0", StartedAt: started, Every: time.Hour},
		{Node: "web-2", Queues: []core.NodeQueue{{Queue: "emails", Cap: core.Unlimited}, {Queue: "charges", Cap: 5, Limit: 5, KeyLimit: 2}}, Version: "v1.4.0", StartedAt: started, Every: time.Second},
		{Node: "web-3", StartedAt: started, Every: time.Hour, Stopped: true},
	}
	for _, b := range beats {
		if err := store.Nodes().Beat(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// web-2 last beat a minute ago: 60 beats missed.
	table := pgx.Identifier{store.Schema(), "txmq_nodes"}.Sanitize()
	if _, err := testenv.PostgresPool(t).Exec(ctx, `UPDATE `+table+` SET last_seen = last_seen - interval '1 minute' WHERE node = 'web-2'`); err != nil {
		t.Fatal(err)
	}
	code, page := get(t, http.DefaultClient, srv.URL+"/nodes")
	for _, want := range []string{
		`<tr data-node="web-1" class="running">`, `queues/emails">emails</a> 2/8`, `queues/reports">reports</a> 1/1 <span class="limits">(cluster 1)</span>`, `<td class="slots">3/9</td>`, `v1.4.0`,
		`<tr data-node="web-2" class="stale">`, `<td class="slots">0/∞</td>`, `charges</a> 0/5 <span class="limits">(cluster 5, per key 2)</span>`,
		`<tr data-node="web-3" class="stopped">`, `<td class="queues">none</td>`, `<td class="version">unknown</td>`,
	} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("GET /nodes: %d, lacks %q:\n%s", code, want, page)
		}
	}
	if strings.Contains(page, "(this node)") {
		t.Errorf("a dashboard not mounted in an app marks a node as its own:\n%s", page)
	}
}

// TestQueueChartAcrossNodes: the queue page's chart adds up what every node's heartbeat says it
// ran, stopped nodes' last rows included, so that the standalone dashboard (no node of its
// own) charts the whole cluster; a node that ran nothing of the queue is not counted.
func TestQueueChartAcrossNodes(t *testing.T) {
	t.Parallel()
	srv, store := dashboard(t, ui.Options{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Minute)
	m := func(ago time.Duration, b, n, f int64) core.NodeMinute {
		return core.NodeMinute{Minute: now.Add(-ago).Unix(), Batches: b, Messages: n, Failed: f}
	}
	beats := []core.NodeBeat{
		{Node: "web-1", Queues: []core.NodeQueue{{Queue: "emails", Cap: 8, Minutes: []core.NodeMinute{m(2*time.Minute, 3, 30, 1), m(0, 2, 20, 0)}}}, Every: time.Hour},
		{Node: "web-2", Queues: []core.NodeQueue{{Queue: "emails", Cap: 8, Minutes: []core.NodeMinute{m(0, 5, 5, 2), m(2*time.Hour, 100, 100, 100)}}}, Every: time.Hour, Stopped: true},
		{Node: "web-3", Queues: []core.NodeQueue{{Queue: "emails", Cap: 8}, {Queue: "reports", Cap: 1, Minutes: []core.NodeMinute{m(0, 7, 7, 7)}}}, Every: time.Hour},
	}
	for _, b := range beats {
		b.StartedAt = now.Add(-time.Hour)
		if err := store.Nodes().Beat(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	code, page := get(t, http.DefaultClient, srv.URL+"/queues/emails")
	for _, want := range []string{`id="chart"`, "10 batches (55 messages) run, 3 failed, by 2 node(s)"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("GET /queues/emails: %d, lacks %q:\n%s", code, want, page)
		}
	}
	// The queues page: each queue's runs over the last hour, the same sums.
	if _, page := get(t, http.DefaultClient, srv.URL+"/"); !strings.Contains(page, `<td class="n runs">10 <span class="failed">(3 failed)</span></td>`) ||
		!strings.Contains(page, `<td class="n runs">7 <span class="failed">(7 failed)</span></td>`) {
		t.Fatalf("the queues page lacks the runs of the last hour (emails 10, 3 failed; reports 7, 7 failed):\n%s", page)
	}
	if _, page := get(t, http.DefaultClient, srv.URL+"/queues/idle"); strings.Contains(page, `id="chart"`) {
		t.Errorf("a queue no node ran has a chart:\n%s", page)
	}
}
