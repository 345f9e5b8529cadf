package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestUIHidePayloads runs `txmq ui --hide-payloads`: a dead letter's page shows its message
// ids and says payloads are hidden, never the payload.
func TestUIHidePayloads(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", testenv.PostgresURL(t), "--schema", schema}
	var out bytes.Buffer
	if code := run(context.Background(), append([]string{"migrate"}, db...), &out, &out); code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", code, out.String())
	}
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	b := parity.EncodeBatch("secrets", []string{"m-1"}, json.RawMessage(`{"card":"4111-1111"}`))
	if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: "secrets", BatchID: b.ID, Body: b.Body,
		Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: 1, Messages: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := store.ListDeadLetters(context.Background(), outbox.DLQFilter{Queue: "secrets", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("the dead letter: %v %v", rows, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- run(ctx, append([]string{"ui", "--listen", "127.0.0.1:0", "--hide-payloads"}, db...), pw, &errOut)
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
	base := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(line, "txmq ui: serving "))[0], "/")
	resp, err := http.Get(fmt.Sprintf("%s/dead/%d", base, rows[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(page), "4111") || !strings.Contains(string(page), `id="payloads-hidden"`) || !strings.Contains(string(page), "m-1") {
		t.Fatalf("GET the dead letter with --hide-payloads: %d\n%s", resp.StatusCode, page)
	}
}
