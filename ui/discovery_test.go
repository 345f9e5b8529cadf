package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
	"github.com/txmq/txmq/ui"
)

// TestQueuesPageListsBusyQueues: a queue with only ready work in the backend (no outbox row,
// dead letter or pause mark names it, and the standalone dashboard has no declared queues)
// is listed, through the backend's queue listing, with its depth; and the page says its
// counts are batches.
func TestQueuesPageListsBusyQueues(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t),
		Schema: testenv.PostgresSchema(t, pool), Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	h, err := ui.Handler(&ui.Options{Store: app.Store, Backend: app.Backend})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	busy := testenv.UniqueName("busy")
	b := parity.EncodeBatch(busy, nil, json.RawMessage(`1`), json.RawMessage(`2`))
	if err := app.Backend.Publish(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	code, page := get(t, http.DefaultClient, srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(page, `data-queue="`+busy+`"`) {
		t.Fatalf("GET /: %d; want the busy queue listed:\n%s", code, page)
	}
	row := page[strings.Index(page, `data-queue="`+busy+`"`):]
	if !strings.Contains(row[:strings.Index(row, "</tr>")], `<td class="n ready">1</td>`) {
		t.Errorf("busy queue's row: %s; want 1 ready batch", row[:strings.Index(row, "</tr>")])
	}
	if !strings.Contains(page, "Counts are batches") {
		t.Errorf("the queues page does not say its counts are batches:\n%s", page)
	}
}
