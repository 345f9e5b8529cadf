package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestExitCodesUnknownAndDestructive runs the built command: every command that names a
// queue refuses one that no source knows (exit 1, the queue and the known ones named), and a
// destructive command refuses to run without --yes when stdin is not a terminal (exit 2).
// One row per command and case: this table is the one issue 32 asks for.
func TestExitCodesUnknownAndDestructive(t *testing.T) {
	t.Parallel()
	pgURL := testenv.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"TXMQ_DATABASE_URL=" + pgURL, "TXMQ_SCHEMA=" + schema}
	withRedis := append([]string{"TXMQ_BACKEND=" + redisURL}, db...)
	if out, errOut, code := runBinaryOut(t, db, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	// Two queues known by their dead letters only: one the rows list and keep, one a row purges.
	kept, purged := testenv.UniqueName("kept"), testenv.UniqueName("purged")
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{kept, purged} {
		b := parity.EncodeBatch(q, nil, json.RawMessage(`"x"`))
		if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: q, BatchID: b.ID, Body: b.Body,
			Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: 1, Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A queue only the backend knows: one ready batch in Redis, nothing in the app database.
	busy := testenv.UniqueName("busy")
	be, err := core.OpenBackend(context.Background(), redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropRedisQueue(t, be, busy); _ = be.Close() })
	if err := be.Publish(context.Background(), parity.EncodeBatch(busy, nil, json.RawMessage(`1`), json.RawMessage(`2`))); err != nil {
		t.Fatal(err)
	}
	// A queue known by its pause mark only (paused ahead of a deploy).
	ahead := testenv.UniqueName("ahead")
	if err := store.Pauses().Pause(context.Background(), ahead, "test"); err != nil {
		t.Fatal(err)
	}
	unknown := []string{`unknown queue`, `"nosuch"`, "known queues: ", kept}

	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		wantErr  []string
		wantOut  []string
	}{
		{"queue pause unknown", db, []string{"queue", "pause", "nosuch"}, exitError, append(unknown, "--create"), nil},
		{"queue pause unknown --create", db, []string{"queue", "pause", testenv.UniqueName("ahead"), "--create"}, exitOK, nil, []string{"paused "}},
		{"queue pause known", db, []string{"queue", "pause", kept}, exitOK, nil, []string{"paused " + kept}},
		{"queue pause known to the backend only", withRedis, []string{"queue", "pause", busy}, exitOK, nil, []string{"paused " + busy}},
		{"queue pause unknown, backend asked", withRedis, []string{"queue", "pause", "nosuch"}, exitError, append(unknown, busy), nil},
		{"status of a queue known by its pause mark", withRedis, []string{"status", "--queue", ahead}, exitOK, nil, []string{ahead}},
		{"status lists busy queues", withRedis, []string{"status"}, exitOK, nil, []string{"batches per queue", busy, kept}},
		{"queue resume unknown", db, []string{"queue", "resume", "nosuch"}, exitError, unknown, nil},
		{"dlq ls unknown", db, []string{"dlq", "ls", "--queue", "nosuch"}, exitError, unknown, nil},
		{"dlq ls known", db, []string{"dlq", "ls", "--queue", kept}, exitOK, nil, []string{kept, "boom"}},
		{"dlq replay unknown", withRedis, []string{"dlq", "replay", "--queue", "nosuch"}, exitError, unknown, nil},
		{"dlq purge unknown", db, []string{"dlq", "purge", "--queue", "nosuch", "--yes"}, exitError, unknown, nil},
		{"dlq purge without --yes", db, []string{"dlq", "purge", "--queue", kept}, exitUsage, []string{"stdin is not a terminal", "--yes"}, nil},
		{"dlq purge --all without --yes", db, []string{"dlq", "purge", "--all"}, exitUsage, []string{"stdin is not a terminal", "--yes"}, nil},
		{"dlq purge --yes", db, []string{"dlq", "purge", "--queue", purged, "--yes"}, exitOK, nil, []string{"purged 1"}},
		{"outbox ls unknown", db, []string{"outbox", "ls", "--queue", "nosuch"}, exitError, unknown, nil},
		{"msg ls unknown", db, []string{"msg", "ls", "--queue", "nosuch"}, exitError, unknown, nil},
		{"status unknown", withRedis, []string{"status", "--queue", "nosuch"}, exitError, []string{`unknown queue "nosuch"`, "known queues: ", kept}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runExpect(t, tt.env, tt.args, tt.wantCode, tt.wantOut, tt.wantErr)
		})
	}
	// Once every row ran (the rows are parallel: cleanups run after them): nothing of kept was
	// purged by the refused rows, and purged was.
	t.Cleanup(func() {
		if n, err := store.DeadLetterCounts(context.Background()); err != nil || n[kept] != 1 || n[purged] != 0 {
			t.Errorf("dead letters after the rows: %v %v; want 1 of %s (refused purges) and none of %s", n, err, kept, purged)
		}
	})
}

// TestHelpListsConnectionFlags: `txmq X --help` of every command lists the flags that say
// where the command connects, subcommand groups (dlq, queue, msg, ...) included.
func TestHelpListsConnectionFlags(t *testing.T) {
	t.Parallel()
	appDB := []string{"-database-url", "-schema", "-backend"}
	want := map[string][]string{
		"bench": {"-backend"}, "demo": {"-database-url", "-schema"},
		"dlq": appDB, "queue": appDB, "msg": appDB, "outbox": appDB, "schedule": appDB, "nodes": appDB,
		"status": append(appDB, "-drain"), "migrate": appDB, "ui": appDB,
	}
	for name := range commands {
		flags, ok := want[name]
		if !ok {
			t.Errorf("command %q: say in this test which connection flags its --help lists", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runBinaryOut(t, nil, name, "--help")
			if code != exitOK {
				t.Fatalf("txmq %s --help: exit %d\n%s%s", name, code, out, errOut)
			}
			for _, f := range flags {
				if !strings.Contains(out+errOut, "  "+f+" ") {
					t.Errorf("txmq %s --help does not list %s:\n%s%s", name, f, out, errOut)
				}
			}
		})
	}
}

// dropRedisQueue deletes every key of queue on the Redis backend be, so that a test leaves no
// busy queue behind on the shared server.
func dropRedisQueue(t *testing.T, be core.Backend, queue string) {
	t.Helper()
	rb, ok := be.(interface {
		Client() goredis.UniversalClient
		Prefix() string
	})
	if !ok {
		t.Fatalf("%T is not the Redis backend", be)
	}
	ctx := context.Background()
	it := rb.Client().Scan(ctx, 0, "{"+rb.Prefix()+":"+queue+"}:*", 100).Iterator()
	for it.Next(ctx) {
		if err := rb.Client().Del(ctx, it.Val()).Err(); err != nil {
			t.Errorf("deleting %s: %v", it.Val(), err)
		}
	}
	if err := it.Err(); err != nil {
		t.Errorf("scanning the keys of %s: %v", queue, err)
	}
}
