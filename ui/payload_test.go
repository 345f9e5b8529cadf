package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

var (
	messageRow = regexp.MustCompile(`<tr data-id="[^"]+">`)
	prevLink   = regexp.MustCompile(`<a id="prev-page" href="([^"]+)">`)
	nextMsgs   = regexp.MustCompile(`<a id="next-page" href="([^"]+)">`)
)

// payloadDashboard serves a dashboard with opts on an app over a memory backend holding n
// delayed batches of queue "orders", one message each, payload {"n":i,"email":"buyer@example.com"};
// it returns the server and the app.
func payloadDashboard(t *testing.T, opts ui.Options, n int) (*httptest.Server, *txmq.App) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://" + testenv.UniqueName("uipayload"), DatabaseURL: testenv.PostgresURL(t), Schema: schema, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	for i := range n {
		b := parity.EncodeBatch("orders", []string{fmt.Sprintf("order-%03d", i)}, json.RawMessage(fmt.Sprintf(`{"n":%d,"email":"buyer@example.com"}`, i)))
		b.Delay = time.Hour
		if err := app.Backend.Publish(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	opts.Store, opts.Backend = app.Store, app.Backend
	h, err := ui.Handler(&opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, app
}

// mask is a FormatPayload hook that hides e-mail addresses.
func mask(queue string, p []byte) string {
	return queue + ": " + strings.ReplaceAll(string(p), "buyer@example.com", "***")
}

// TestMessagesShowPayloadsPaged: the Messages list shows each message's payload through the
// FormatPayload hook, 50 a page with links both ways; one message's page shows its payload.
func TestMessagesShowPayloadsPaged(t *testing.T) {
	t.Parallel()
	srv, _ := payloadDashboard(t, ui.Options{FormatPayload: mask}, 60)
	code, page := get(t, http.DefaultClient, srv.URL+"/messages?queue=orders")
	if code != http.StatusOK {
		t.Fatalf("GET /messages: %d\n%s", code, page)
	}
	if n := len(messageRow.FindAllString(page, -1)); n != 50 {
		t.Fatalf("the first page lists %d messages, want 50:\n%s", n, page)
	}
	if !strings.Contains(page, `orders: {&#34;n&#34;:59,&#34;email&#34;:&#34;***&#34;}`) || strings.Contains(page, "buyer@example.com") {
		t.Fatalf("the first page does not show the payloads through the hook:\n%s", page)
	}
	m := nextMsgs.FindStringSubmatch(page)
	if m == nil || prevLink.MatchString(page) {
		t.Fatalf("the first page of 60 has no next link, or a previous one:\n%s", page)
	}
	_, page = get(t, http.DefaultClient, srv.URL+"/"+strings.TrimPrefix(html.UnescapeString(m[1]), "./"))
	if n := len(messageRow.FindAllString(page, -1)); n != 10 || nextMsgs.MatchString(page) || !prevLink.MatchString(page) {
		t.Fatalf("the second page lists %d messages (want 10), with a previous link and no next:\n%s", n, page)
	}
	if !strings.Contains(page, `order-000`) {
		t.Fatalf("the second page lacks the oldest message:\n%s", page)
	}
	_, page = get(t, http.DefaultClient, srv.URL+"/messages?id=order-007")
	if !strings.Contains(page, `<section class="message" id="payload">`) || !strings.Contains(page, `orders: {&#34;n&#34;:7,`) {
		t.Fatalf("the message's page does not show its payload:\n%s", page)
	}
	if code, page := get(t, http.DefaultClient, srv.URL+"/messages?offset=-1"); code != http.StatusOK || !strings.Contains(page, "offset &#34;-1&#34;: use a number &gt;= 0") {
		t.Fatalf("a bad offset: %d\n%s", code, page)
	}
}

// TestHidePayloads: with HidePayloads no page shows a payload, the Messages page's and the
// dead letters' alike, and the pages say they are hidden.
func TestHidePayloads(t *testing.T) {
	t.Parallel()
	srv, app := payloadDashboard(t, ui.Options{HidePayloads: true}, 3)
	b := parity.EncodeBatch("orders", []string{"dead-1"}, json.RawMessage(`{"email":"buyer@example.com"}`))
	if err := app.Store.DeadLetter(context.Background(), &core.DeadLetter{Queue: "orders", BatchID: b.ID, Body: b.Body, Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: 1, Messages: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := app.Store.DeadLetterCounts(context.Background())
	if err != nil || rows["orders"] != 1 {
		t.Fatalf("dead letters: %v %v", rows, err)
	}
	_, list := get(t, http.DefaultClient, srv.URL+"/dead?queue=orders")
	id := regexp.MustCompile(`<tr data-id="([0-9]+)">`).FindStringSubmatch(list)
	if id == nil {
		t.Fatalf("no dead letter listed:\n%s", list)
	}
	for _, path := range []string{"/messages?queue=orders", "/messages?id=order-001", "/dead/" + id[1]} {
		code, page := get(t, http.DefaultClient, srv.URL+path)
		if code != http.StatusOK || strings.Contains(page, "buyer@example.com") || !strings.Contains(page, `id="payloads-hidden"`) {
			t.Errorf("GET %s with HidePayloads: %d, shows a payload or does not say they are hidden:\n%s", path, code, page)
		}
	}
}
