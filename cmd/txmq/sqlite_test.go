package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestSQLiteBackendCommands: the operator commands work against a sqlite:// backend with no
// server: migrate creates the jobs tables in the file (and says so once), status shows the
// stored batches, msg lists, shows and cancels them, and demo runs on the file.
func TestSQLiteBackendCommands(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ops.db")
	backend := "sqlite://" + path
	if out, _ := cli(t, exitOK, "migrate", "--backend", backend, "--database-url", ""); !strings.Contains(out, "sqlite_jobs: applied 4 migration(s) in file "+path+": 0001_init.sql, 0002_unique.sql, 0003_priority.sql, 0004_fair.sql") {
		t.Fatalf("migrate: %s", out)
	}
	if out, _ := cli(t, exitOK, "migrate", "--backend", backend, "--database-url", ""); !strings.Contains(out, "is up to date") {
		t.Fatalf("migrate again: %s", out)
	}

	ctx := context.Background()
	be, err := core.OpenBackend(ctx, backend+"?txmq_reap_interval=-1s")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, b := range []core.OutgoingBatch{testBatch("mails", "a", "b"), testBatch("mails", "c")} {
		if err := be.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	later := testBatch("mails", "later")
	later.Delay = time.Hour
	if err := be.Publish(ctx, later); err != nil {
		t.Fatal(err)
	}

	out := cliText(t, exitOK, "status", "--backend", backend, "--database-url", "")
	if !strings.Contains(out, "mails") {
		t.Fatalf("status lacks the queue:\n%s", out)
	}
	out = cliText(t, exitOK, "msg", "ls", "--backend", backend, "--database-url", "", "--queue", "mails", "--json")
	if strings.Count(out, `"id"`) != 4 {
		t.Fatalf("msg ls lists %d messages, want 4:\n%s", strings.Count(out, `"id"`), out)
	}
	cliText(t, exitOK, "msg", "cancel", "--backend", backend, "--database-url", "", "--queue", "mails", "--state", "delayed", "--yes")
	if d, err := be.Depths(ctx, []string{"mails"}); err != nil || d["mails"].Counts() != (core.Depth{Ready: 2}) {
		t.Fatalf("after cancelling the delayed message: %+v, %v; want 2 ready", d, err)
	}

	out = cliText(t, exitOK, "demo", "-n", "200", "--backend", "sqlite://"+filepath.Join(t.TempDir(), "demo.db"), "--database-url", "")
	if !strings.Contains(out, "txmq demo: sqlite backend") || !strings.Contains(out, "max in flight observed 1") {
		t.Fatalf("demo on sqlite:\n%s", out)
	}
}

// TestSQLiteAppDatabaseCommands: with a sqlite:// app database (the jobs in the same file),
// migrate creates the outbox and control tables in the file, dlq and status read them, queue
// pause/paused/resume keep the mark there; a schema SQLite cannot have is a usage error naming
// it.
func TestSQLiteAppDatabaseCommands(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	url := "sqlite://" + path
	if out, _ := cli(t, exitOK, "migrate", "--backend", url, "--database-url", url); !strings.Contains(out, "sqlite_jobs: applied 4 migration(s)") || !strings.Contains(out, "outbox and dead-letter tables (and the pause, schedule, rate-limit and heartbeat tables) of file "+path+" (sqlite) are up to date") {
		t.Fatalf("migrate: %s", out)
	}
	if out, _ := cli(t, exitOK, "migrate", "--backend", url, "--database-url", "sqlite:"+path); !strings.Contains(out, "up to date") {
		t.Fatalf("migrate again: %s", out)
	}
	if out := cliText(t, exitOK, "dlq", "ls", "--database-url", url); !strings.Contains(out, "no dead letters") {
		t.Fatalf("dlq ls: %s", out)
	}
	if out := cliText(t, exitOK, "status", "--backend", url, "--database-url", url); !strings.Contains(out, "no outbox rows or dead letters") {
		t.Fatalf("status: %s", out)
	}
	// The pause marks live in the file too: every process on it reads them.
	if out := cliText(t, exitOK, "queue", "pause", "orders", "--create", "--by", "ops", "--database-url", url); !strings.Contains(out, "paused orders") {
		t.Fatalf("queue pause: %s", out)
	}
	if out := cliText(t, exitOK, "queue", "paused", "--database-url", url); !strings.Contains(out, "orders") || !strings.Contains(out, "ops") {
		t.Fatalf("queue paused: %s", out)
	}
	if out := cliText(t, exitOK, "queue", "resume", "orders", "--database-url", url); !strings.Contains(out, "resumed orders") {
		t.Fatalf("queue resume: %s", out)
	}
	if _, errOut := cli(t, exitUsage, "dlq", "ls", "--database-url", url, "--schema", "other"); !strings.Contains(errOut, "SQLite has no schemas") {
		t.Fatalf("dlq ls with a schema: %s", errOut)
	}
}
