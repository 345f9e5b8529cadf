package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestMsgCommands drives msg show, ls and cancel against a ledger in the real Postgres.
func TestMsgCommands(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"--database-url", url, "--schema", schema, "--backend", ""}
	with := func(args ...string) []string { return append(args, db...) }

	if out := cliText(t, exitError, with("msg", "show", "m1")...); !strings.Contains(out, "unknown") || !strings.Contains(out, "no ledger table") {
		t.Fatalf("msg show without a ledger table: %s", out)
	}
	cliText(t, exitOK, "migrate", "--database-url", url, "--schema", schema)
	l, err := ledger.New(pool, &ledger.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	l.RecordMessages([]core.MessageInfo{
		{ID: "m1", Queue: "emails", BatchID: "b1", State: core.StateRetry, PublishedAt: now.Add(-time.Minute), UpdatedAt: now, Due: now.Add(time.Minute), Node: "n1", Runs: 2, Error: "smtp: 550"},
		{ID: "m2", Queue: "emails", BatchID: "b2", State: core.StateCompleted, PublishedAt: now.Add(-time.Minute), UpdatedAt: now, Node: "n1", Runs: 1},
		{ID: "m3", Queue: "reports", State: core.StateDelayed, PublishedAt: now.Add(-2 * time.Hour), UpdatedAt: now.Add(-2 * time.Hour), Due: now.Add(time.Hour)},
	})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	out := cliText(t, exitOK, with("msg", "show", "m1")...)
	for _, want := range []string{"emails", "retry", "b1", "n1", "smtp: 550", "next run"} {
		if !strings.Contains(out, want) {
			t.Errorf("msg show m1: missing %q in\n%s", want, out)
		}
	}
	if out := cliText(t, exitError, with("msg", "show", "nope")...); !strings.Contains(out, "not found") {
		t.Errorf("msg show of an unknown id: %s", out)
	}
	var listed []core.MessageInfo
	if err := json.Unmarshal([]byte(cliText(t, exitOK, with("msg", "ls", "--queue", "emails", "--json")...)), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("msg ls --queue emails --json: %v %v", listed, err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "completed"}, []string{"m2"}},
		{[]string{"--since", "1h"}, []string{"m2", "m1"}},
		{[]string{"--until", "1h"}, []string{"m3"}},
		{[]string{"--limit", "1", "--queue", "reports"}, []string{"m3"}},
	} {
		var got []core.MessageInfo
		if err := json.Unmarshal([]byte(cliText(t, exitOK, with(append([]string{"msg", "ls", "--json"}, c.args...)...)...)), &got); err != nil {
			t.Fatalf("msg ls %v: %v", c.args, err)
		}
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != strings.Join(c.want, ",") {
			t.Errorf("msg ls %v = %v, want %v", c.args, ids, c.want)
		}
	}
	if out := cliText(t, exitOK, with("msg", "ls", "--queue", "emails")...); !strings.Contains(out, "STATE") || !strings.Contains(out, "m1") {
		t.Errorf("msg ls table: %s", out)
	}
	if out := cliText(t, exitUsage, with("msg", "ls", "--state", "sleeping")...); !strings.Contains(out, "queued") {
		t.Errorf("msg ls --state sleeping: %s", out)
	}

	if out := cliText(t, exitOK, with("msg", "cancel", "m1")...); !strings.Contains(out, "cancelled") {
		t.Errorf("msg cancel m1: %s", out)
	}
	if out := cliText(t, exitError, with("msg", "cancel", "m2")...); !strings.Contains(out, "cannot be cancelled") || !strings.Contains(out, "completed") {
		t.Errorf("msg cancel of a completed message: %s", out)
	}
	var m core.MessageInfo
	if err := json.Unmarshal([]byte(cliText(t, exitOK, with("msg", "show", "m1", "--json")...)), &m); err != nil || m.State != core.StateCancelled {
		t.Errorf("msg show m1 after cancel: %+v %v", m, err)
	}
}

// TestMsgWithoutLedger: without a database, the backend's native lookup answers (memory: an
// empty backend knows no message).
func TestMsgWithoutLedger(t *testing.T) {
	t.Parallel()
	if out := cliText(t, exitError, "msg", "show", "x", "--database-url", "", "--backend", "memory://"); !strings.Contains(out, "not found") {
		t.Errorf("msg show on memory: %s", out)
	}
	if out := cliText(t, exitUsage, "msg", "show", "x", "--database-url", "", "--backend", ""); !strings.Contains(out, "nothing to look in") {
		t.Errorf("msg show with nothing: %s", out)
	}
}
