package browsertest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

// chromium returns the browser to drive, skipping the test (failing it on CI) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("TXMQ_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if testenv.Required() {
		t.Fatal("no chromium: install Debian's chromium (apt-get install chromium; .ci/run does) or set TXMQ_CHROMIUM")
	}
	t.Skip("no chromium (apt-get install chromium, or set TXMQ_CHROMIUM)")
	return ""
}

// screenshots is where the test saves its pages: TXMQ_UI_SCREENSHOTS, else ui/testoutput.
func screenshots(t *testing.T) string {
	dir := os.Getenv("TXMQ_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "testoutput") // ui/testoutput, beside the dashboard's code
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser drives the dashboard in headless Chromium the way an operator uses it:
// numbers that move after a publish, a dead letter opened and replayed, a purge that needs its
// confirmation, and a queue paused and resumed. Each step saves a screenshot; a failing step
// logs the page.
func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	ctx := context.Background()

	reg := txmq.NewRegistry()
	signups := txmq.MustDeclareIn(reg, "signups", txmq.QueueConfig[string]{Transactional: txmq.Try})
	invoices := txmq.MustDeclareIn(reg, "invoices", txmq.QueueConfig[string]{Transactional: txmq.Try, MaxAttempts: 1})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://" + testenv.UniqueName("ui"), DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg, PollWait: 100 * time.Millisecond, PauseCheck: 100 * time.Millisecond, FlushWindow: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	var signedUp, invoiced atomic.Int64
	var invoicesFixed atomic.Bool
	if err := signups.Listen(app.Node, func(_ context.Context, msgs []string) error { signedUp.Add(int64(len(msgs))); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := invoices.Listen(app.Node, func(_ context.Context, msgs []string) error {
		if !invoicesFixed.Load() {
			return errors.New("smtp: 550 mailbox unavailable")
		}
		invoiced.Add(int64(len(msgs)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The payload formatter hook, as an app masking fields would set it: it marks what it
	// rendered, so that the pages show they went through it.
	h, err := ui.ForApp(app, &ui.Options{FormatPayload: func(queue string, p []byte) string { return queue + ": " + string(p) }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/txmq/", http.StripPrefix("/txmq", h)) // mounted under a prefix, as an app would
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL + "/txmq"

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelTimeout()
	shots := screenshots(t)
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
			t.Fatalf("step %q: %v\npage:\n%s", name, err, html)
		}
		if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		}
	}
	// A read is bounded on its own: one that targets a page going away would otherwise hang
	// until the test's deadline and leave no page to show.
	text := func(sel string) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		s, err := chromedp.Run(rctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
			t.Fatalf("reading %s: %v\npage:\n%s", sel, err, html)
		}
		return strings.TrimSpace(s)
	}

	// 1. The queues page, and numbers that move after a publish.
	step("01-queues", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)))
	if got := text(`tr[data-queue="signups"] td.delayed`); got != "0" {
		t.Fatalf("signups delayed = %q before publishing, want 0", got)
	}
	for i := range 3 {
		if err := signups.Publish(ctx, app.Node, "later", txmq.After(time.Hour), txmq.ID("later-"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		step("02-after-publish", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)))
		return text(`tr[data-queue="signups"] td.delayed`) == "3"
	}, "the delayed count of signups shows 3 after 3 delayed publishes")

	// 2. A dead letter: open it, see its message, replay it, see it delivered.
	if err := invoices.Publish(ctx, app.Node, "invoice 42"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		n, err := app.Store.DeadLetterCounts(ctx)
		return err == nil && n["invoices"] == 1
	}, "the failing invoice is dead-lettered")
	step("03-dead-letters", chromedp.Navigate(base+"/dead"), chromedp.WaitVisible(chromedp.CSS(`#dead`)),
		chromedp.Click(chromedp.CSS(`#dead tbody tr a`)), chromedp.WaitVisible(chromedp.CSS(`section.message pre`)))
	if got := text(`section.message pre`); got != `invoices: "invoice 42"` {
		t.Fatalf("the dead letter page shows %q, want the message", got)
	}
	if got := text(`dd.error`); !strings.Contains(got, "smtp: 550") {
		t.Fatalf("the dead letter page shows the error %q, want the listener's", got)
	}
	invoicesFixed.Store(true)
	step("04-replayed", chromedp.Click(chromedp.CSS(`button[name="replay"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "replayed") {
		t.Fatalf("after replay the page says %q", got)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return invoiced.Load() == 1 }, "the replayed invoice is delivered")
	step("04b-queue-page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`tr[data-queue="invoices"] td a`)), chromedp.WaitVisible(chromedp.CSS(`#chart`)))
	if got := text(`#runs`); !strings.Contains(got, "2 batches (2 messages) run, 1 failed") {
		t.Fatalf("the invoices page says %q, want its 2 runs, 1 failed", got)
	}
	if got := text(`#settings`); !strings.Contains(got, "Try") || !strings.Contains(got, "1 at most") {
		t.Fatalf("the invoices settings read %q", got)
	}

	// 3. Purge needs its confirmation.
	invoicesFixed.Store(false)
	if err := invoices.Publish(ctx, app.Node, "invoice 43"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		n, err := app.Store.DeadLetterCounts(ctx)
		return err == nil && n["invoices"] == 1
	}, "the second invoice is dead-lettered")
	step("05-purge-unconfirmed", chromedp.Navigate(base+"/dead?queue=invoices"), chromedp.WaitVisible(chromedp.CSS(`#purge`)),
		chromedp.Click(chromedp.CSS(`button[name="purge"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "not purged") {
		t.Fatalf("an unconfirmed purge says %q, want it refused", got)
	}
	// From a fresh page (no banner), as for Resume below: the refusal's #msg still showing
	// would let WaitVisible return before the purge's page loads.
	step("06-purged", chromedp.Navigate(base+"/dead?queue=invoices"), chromedp.WaitVisible(chromedp.CSS(`#purge`)),
		chromedp.SendKeys(chromedp.CSS(`#purge input[name="confirm"]`), "invoices"),
		chromedp.Click(chromedp.CSS(`button[name="purge"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "purged 2 dead letter(s) of invoices") { // the replayed one and the new one
		t.Fatalf("a confirmed purge says %q", got)
	}
	if n, err := app.Store.DeadLetterCounts(ctx); err != nil || n["invoices"] != 0 {
		t.Fatalf("dead letters of invoices after the purge: %v, %v; want none", n, err)
	}

	// 4. Pause a queue and see it stop; resume it and see it go on.
	step("07-pause", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`tr[data-queue="signups"] button[name="pause"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`tr[data-queue="signups"] td.state`); !strings.HasPrefix(got, "paused") {
		t.Fatalf("signups state %q after Pause, want paused", got)
	}
	time.Sleep(500 * time.Millisecond) // PauseCheck (100 ms) plus a fetch
	before := signedUp.Load()
	if err := signups.Publish(ctx, app.Node, "now"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := signedUp.Load(); got != before {
		t.Fatalf("a paused queue ran %d batches", got-before)
	}
	// From a fresh page, as for Pause: the Pause's #msg still showing would let WaitVisible
	// return before the Resume's page loads, and the state be read from a page going away
	// (the read then hung until the test's deadline).
	step("08-resume", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`tr[data-queue="signups"] button[name="resume"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`tr[data-queue="signups"] td.state`); got != "running" {
		t.Fatalf("signups state %q after Resume, want running", got)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return signedUp.Load() == before+1 }, "the resumed queue runs the message published while paused")

	// The Schedules page, from the header's link.
	step("08b-schedules", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`header nav a[href$="schedules"]`)), chromedp.WaitVisible(chromedp.CSS(`#schedules`)))
	if got := text(`#schedules tbody`); !strings.Contains(got, "No schedule has published a tick yet") {
		t.Fatalf("the Schedules page of an app without schedules says %q", got)
	}

	// The Nodes page, from the header's link: this app's node, running, listening to both
	// queues (its heartbeat is written at Start).
	node := `#nodes tr[data-node="` + app.Node.ID() + `"]`
	step("08b2-nodes", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`header nav a[href$="nodes"]`)), chromedp.WaitVisible(chromedp.CSS(node)))
	if got := text(node + ` td:first-child`); got != app.Node.ID()+" (this node)" {
		t.Fatalf("the Nodes page names the serving node %q, want it marked as this node", got)
	}
	if got := text(node + ` td.state`); got != "running" {
		t.Fatalf("the Nodes page shows this node as %q, want running", got)
	}
	if got := text(node + ` td.queues`); !strings.Contains(got, "invoices") || !strings.Contains(got, "signups") {
		t.Fatalf("the Nodes page lists this node's queues as %q, want invoices and signups", got)
	}

	// Live messages with their payloads: the delayed signups listed with a preview of each
	// payload, one opened with its payload in full (from the backend's native lookup).
	// The unfiltered list already shows later-a, so the wait is for the filtered page: its
	// queue box carries the value as an attribute, which typing into the old page does not set.
	step("08c-messages", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)),
		chromedp.Click(chromedp.CSS(`header nav a[href$="messages"]`)), chromedp.WaitVisible(chromedp.CSS(`#list`)),
		chromedp.SendKeys(chromedp.CSS(`#list input[name="queue"]`), "signups"),
		chromedp.Click(chromedp.CSS(`#list button`)), chromedp.WaitVisible(chromedp.CSS(`#list input[name="queue"][value="signups"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#messages tr[data-id="later-a"]`)))
	if got := text(`#messages tr[data-id="later-a"] td.payload`); got != `signups: "later"` {
		t.Fatalf("the Messages list shows the payload of later-a as %q, want it through the formatter", got)
	}
	step("08d-message-payload", chromedp.Click(chromedp.CSS(`#messages tr[data-id="later-a"] a`)), chromedp.WaitVisible(chromedp.CSS(`#payload pre`)))
	if got := text(`#payload pre`); got != `signups: "later"` {
		t.Fatalf("the message page shows the payload %q, want it through the formatter", got)
	}

	// 5. Auto-refresh: the page reloads itself (a meta refresh, no JavaScript) and shows a
	// publish made after it loaded, with no navigation by the test.
	// The page may be reloading while it is read: a read that finds no node is retried.
	delayedNow := func() string {
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr[data-queue="signups"] td.delayed`)))
		if err != nil {
			return "(reloading: " + err.Error() + ")"
		}
		return strings.TrimSpace(s)
	}
	step("09-auto-refresh", chromedp.Navigate(base+"/?refresh=2"), chromedp.WaitVisible(chromedp.CSS(`#refresh-off`)))
	txmqtest.Eventually(t, 10*time.Second, func() bool { return delayedNow() == "3" }, "the auto-refreshing page shows 3 delayed signups")
	if err := signups.Publish(ctx, app.Node, "later", txmq.After(time.Hour), txmq.ID("later-refresh")); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 15*time.Second, func() bool { return delayedNow() == "4" },
		"the auto-refreshing page shows the fourth delayed signup without being navigated")
	step("10-auto-refreshed", chromedp.WaitVisible(chromedp.CSS(`#refresh-off`)))

	// 6. Bulk cancel: every delayed signup, refused until the queue's name is typed.
	step("11-cancel-where-unconfirmed", chromedp.Navigate(base+"/messages?queue=signups&state=delayed"), chromedp.WaitVisible(chromedp.CSS(`#cancel-where`)),
		chromedp.Click(chromedp.CSS(`button[name="cancel-where"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "not cancelled") {
		t.Fatalf("an unconfirmed bulk cancel says %q, want it refused", got)
	}
	step("12-cancel-where", chromedp.Navigate(base+"/messages?queue=signups&state=delayed"), chromedp.WaitVisible(chromedp.CSS(`#cancel-where`)),
		chromedp.SendKeys(chromedp.CSS(`#cancel-where input[name="confirm"]`), "signups"),
		chromedp.Click(chromedp.CSS(`button[name="cancel-where"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "cancelled 4 delayed message(s) of signups") {
		t.Fatalf("a confirmed bulk cancel says %q", got)
	}
	step("13-after-cancel-where", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)))
	if got := text(`tr[data-queue="signups"] td.delayed`); got != "0" {
		t.Fatalf("signups delayed = %q after the bulk cancel, want 0", got)
	}

	// 7. Run now: two signups delayed an hour run at once after the queue's name is typed.
	before = signedUp.Load()
	if err := signups.PublishMany(ctx, app.Node, []string{"x", "y"}, txmq.After(time.Hour), txmq.IDs("hurry-1", "hurry-2")); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		ms, err := app.Inspector().List(ctx, txmq.MessageFilter{Queue: "signups", State: "delayed"})
		return err == nil && len(ms) == 2
	}, "the two delayed signups are stored")
	step("14-run-now", chromedp.Navigate(base+"/messages?queue=signups&state=delayed"), chromedp.WaitVisible(chromedp.CSS(`#run-now`)),
		chromedp.SendKeys(chromedp.CSS(`#run-now input[name="confirm"]`), "signups"),
		chromedp.Click(chromedp.CSS(`button[name="run-now"]`)), chromedp.WaitVisible(chromedp.CSS(`#msg`)))
	if got := text(`#msg`); !strings.Contains(got, "made 2 delayed message(s) of signups due now") {
		t.Fatalf("run now says %q", got)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return signedUp.Load() == before+2 }, "the two signups made due run at once")

	// 8. Dark mode: the pages follow the browser's colour scheme (prefers-color-scheme).
	dark := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}
	if _, err := chromedp.Call(bctx, emulation.SetEmulatedMedia, dark); err != nil {
		t.Fatalf("emulating a dark colour scheme: %v", err)
	}
	step("15-dark", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queues`)))
	bg, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if err != nil || bg != "rgb(22, 24, 29)" {
		t.Fatalf("the queues page in a dark colour scheme has the background %q (%v), want the dark one", bg, err)
	}

	// The pictures of the dashboard in docs/ are this test's screenshots: TXMQ_UI_DOCS=1
	// (scripts/screenshots) copies them there, so that they are remade from the dashboard as it
	// is rather than drawn by hand. docs/dashboard.png is the queues page with signups paused.
	if os.Getenv("TXMQ_UI_DOCS") != "" {
		docs := filepath.Join("..", "..", "docs")
		for from, to := range docShots {
			png, err := os.ReadFile(filepath.Join(shots, from+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(docs, to), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// docShots maps the steps whose screenshots docs/ shows to their names there.
var docShots = map[string]string{
	"07-pause":                    "dashboard.png",
	"04b-queue-page":              "screenshots/queue.png",
	"03-dead-letters":             "screenshots/dead-letter.png",
	"08c-messages":                "screenshots/messages.png",
	"08d-message-payload":         "screenshots/message.png",
	"08b-schedules":               "screenshots/schedules.png",
	"08b2-nodes":                  "screenshots/nodes.png",
	"11-cancel-where-unconfirmed": "screenshots/bulk-cancel.png",
	"15-dark":                     "screenshots/dark.png",
}
