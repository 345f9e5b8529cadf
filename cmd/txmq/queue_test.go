package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestQueuePauseResume drives queue pause, paused and resume against the real Postgres, and
// checks the store (what nodes read) agrees.
func TestQueuePauseResume(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", url, "--schema", schema}
	cli := func(wantCode int, args ...string) string { t.Helper(); return cliText(t, wantCode, args...) }
	cli(exitOK, append([]string{"migrate"}, db...)...)
	if out := cli(exitOK, append([]string{"queue", "paused"}, db...)...); !strings.Contains(out, "no queue is paused") {
		t.Fatalf("queue paused: %s", out)
	}
	if out := cli(exitError, append([]string{"queue", "pause", "emails", "--by", "ops"}, db...)...); !strings.Contains(out, `unknown queue: queue "emails"`) || !strings.Contains(out, "--create") {
		t.Fatalf("queue pause of a queue no source knows: %s", out)
	}
	if out := cli(exitOK, append([]string{"queue", "pause", "emails", "--by", "ops", "--create"}, db...)...); !strings.Contains(out, "paused emails") {
		t.Fatalf("queue pause: %s", out)
	}
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	if names, err := store.Pauses().Paused(context.Background()); err != nil || len(names) != 1 || names[0] != "emails" {
		t.Fatalf("Paused after queue pause = %v, %v; want [emails]", names, err)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(cli(exitOK, append([]string{"queue", "paused", "--json"}, db...)...)), &listed); err != nil || len(listed) != 1 || listed[0]["paused_by"] != "ops" {
		t.Fatalf("queue paused --json: %v %v", listed, err)
	}
	cli(exitOK, append([]string{"queue", "resume", "emails"}, db...)...)
	if names, err := store.Pauses().Paused(context.Background()); err != nil || len(names) != 0 {
		t.Fatalf("Paused after queue resume = %v, %v; want none", names, err)
	}
	if out := cli(exitOK, append([]string{"schedule", "ls"}, db...)...); !strings.Contains(out, "no schedule") {
		t.Fatalf("schedule ls: %s", out)
	}
	tick := time.Now().Truncate(time.Second)
	if ok, err := store.Ticks().ClaimTick(context.Background(), "nightly", "reports", tick, tick.Add(time.Hour), func(context.Context) error { return nil }); err != nil || !ok {
		t.Fatalf("ClaimTick: %v %v", ok, err)
	}
	if ok, err := store.Ticks().ClaimTick(context.Background(), "nightly", "reports", tick, tick.Add(time.Hour), func(context.Context) error { t.Error("published a tick twice"); return nil }); err != nil || ok {
		t.Fatalf("second ClaimTick of one tick: %v %v; want false", ok, err)
	}
	if out := cli(exitOK, append([]string{"schedule", "ls"}, db...)...); !strings.Contains(out, "nightly") || !strings.Contains(out, tick.Add(time.Hour).UTC().Format(time.RFC3339)) {
		t.Fatalf("schedule ls: %s", out)
	}
	if out := cli(exitUsage, append([]string{"queue", "pause", "Bad Name"}, db...)...); !strings.Contains(out, "queue name") {
		t.Fatalf("queue pause with a bad name: %s", out)
	}
	if out := cli(exitUsage, "queue", "pause"); !strings.Contains(out, "name the queue") {
		t.Fatalf("queue pause without a name: %s", out)
	}
}

func TestUIUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--listen", "0.0.0.0:8080", "--database-url", "postgres://u@127.0.0.1/db"}, "not loopback"},
		{[]string{"ui", "--listen", "nonsense"}, "host:port"},
		{[]string{"ui", "--user", "ops"}, "TXMQ_UI_PASSWORD"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("txmq %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}
