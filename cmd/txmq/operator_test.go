package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// runExpect runs the built binary with env and args and fails the test unless it exits with
// wantCode and its stdout and stderr hold every string of wantOut and wantErr. It returns the
// outputs and a fail func for the caller's further checks, which reports the run whole.
func runExpect(t *testing.T, env, args []string, wantCode int, wantOut, wantErr []string) (out, errOut string, fail func(why string)) {
	t.Helper()
	out, errOut, code := runBinaryOut(t, env, args...)
	fail = func(why string) {
		t.Helper()
		t.Fatalf("%s\ntxmq %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", why, strings.Join(args, " "), code, wantCode, out, errOut)
	}
	if code != wantCode {
		fail("exit code")
	}
	for _, w := range wantOut {
		if !strings.Contains(out, w) {
			fail("stdout lacks " + w)
		}
	}
	for _, w := range wantErr {
		if !strings.Contains(errOut, w) {
			fail("stderr lacks " + w)
		}
	}
	return out, errOut, fail
}

// runBinaryOut runs the built command with env added and returns its stdout, stderr and exit code.
func runBinaryOut(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), "TXMQ_DATABASE_URL=", "TXMQ_BACKEND=", "TXMQ_SCHEMA=", "TXMQ_DRAIN_BACKENDS=")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("txmq %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// apiName matches a Go identifier of the library's API (ListDeadLetters, OpenBackend, ...) in an
// operator message.
var apiName = regexp.MustCompile(`\b(ListDeadLetters|GetDeadLetter|OpenBackend|DeadLetterCounts|ErrNotFound|pgxpool|ParseConfig)\b`)

// prefix matches a message prefix: "txmq:", "txmq status:", "txmq outbox:".
var prefix = regexp.MustCompile(`\btxmq( [a-z]+)?:`)

// TestOperatorMessages runs the built binary over the error cases an operator meets first and
// checks stdout, stderr and the exit code: one prefix per line, no Go API names, the setting or
// flag to change, exit 2 for usage errors and 1 for failures.
func TestOperatorMessages(t *testing.T) {
	t.Parallel()
	pgURL := testenv.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	db := []string{"TXMQ_DATABASE_URL=" + pgURL, "TXMQ_SCHEMA=" + schema}
	withRedis := append([]string{"TXMQ_BACKEND=" + redisURL}, db...)
	replayed := testenv.UniqueName("replayed")
	if _, errOut, code := runBinaryOut(t, db, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	// One dead letter of queue replayed, replayed into Redis by the command: the batch then waits in
	// the backend, and status must count it there.
	store, err := outbox.New(pool, &outbox.Options{Schema: schema, Backend: noBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	b := parity.EncodeBatch(replayed, []string{"m1"}, json.RawMessage(`"hello"`))
	id, body := b.ID, b.Body
	if err := store.DeadLetter(context.Background(), &core.DeadLetter{Queue: replayed, BatchID: id, Body: body,
		Reason: core.ReasonDeliveryExhausted, Error: "boom", Attempts: 3, Messages: 1}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runBinaryOut(t, withRedis, "dlq", "replay", "--queue", replayed); code != exitOK || !strings.Contains(out, "replayed 1") {
		t.Fatalf("dlq replay: exit %d\n%s%s", code, out, errOut)
	}

	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		wantOut  []string // each must appear on stdout
		wantErr  []string // each must appear on stderr
		notErr   []string // none may appear on stderr
	}{
		{name: "dlq show of a missing id", env: db, args: []string{"dlq", "show", "12345"}, wantCode: exitError,
			wantErr: []string{"no dead letter 12345", "txmq dlq ls"}, notErr: []string{"txmq outbox:"}},
		{name: "database url of another scheme", args: []string{"status", "--database-url", "mongodb://u:p@db.example/app"}, wantCode: exitUsage,
			wantErr: []string{"--database-url", "mongodb://u:xxxxx@db.example/app", "expected postgres://", "mysql://", "sqlite://"}, notErr: []string{"keyword/value", "axxxxx", "cannot xxxxx"}},
		{name: "database url of another scheme from the environment", env: []string{"TXMQ_DATABASE_URL=mongodb://db.example/app"}, args: []string{"dlq", "ls"}, wantCode: exitUsage,
			wantErr: []string{"TXMQ_DATABASE_URL", "expected postgres://"}},
		{name: "sqlite database file that does not exist", env: []string{"TXMQ_DATABASE_URL=sqlite://no-such-dir/app.db"}, args: []string{"dlq", "ls"}, wantCode: exitUsage,
			wantErr: []string{"TXMQ_DATABASE_URL", "no-such-dir/app.db does not exist", "txmq migrate"}},
		{name: "backend url of another scheme", args: []string{"status", "--backend", "amqp://u:p@mq.example/app", "--queue", "a"}, wantCode: exitUsage,
			wantErr: []string{"--backend", `unknown scheme "amqp"`, "redis://", "amqp://u:xxxxx@mq.example/app"}},
		{name: "database on a wrong port", args: []string{"status", "--database-url", "postgres://postgres@127.0.0.1:1/test"}, wantCode: exitError,
			wantErr: []string{"connection refused", "--database-url"}},
		{name: "backend on a wrong port", args: []string{"status", "--backend", "redis://127.0.0.1:1/0", "--queue", "a"}, wantCode: exitError,
			wantErr: []string{"connection refused", "--backend"}},
		{name: "bad backend option", args: []string{"status", "--backend", "redis://127.0.0.1:6379/0?bogus=1", "--queue", "a"}, wantCode: exitUsage,
			wantErr: []string{"--backend", "bogus"}},
		{name: "unknown queue", env: withRedis, args: []string{"status", "--queue", "nosuchqueue"}, wantCode: exitError,
			wantErr: []string{`unknown queue "nosuchqueue"`, "known queues: " + replayed}},
		{name: "invalid queue name", env: withRedis, args: []string{"status", "--queue", "Bad.Name"}, wantCode: exitUsage,
			wantErr: []string{`"Bad.Name"`, "--queue"}},
		{name: "memory backend", args: []string{"status", "--backend", "memory://", "--queue", "a"}, wantCode: exitUsage,
			wantErr: []string{"memory://", "another process", "--backend"}},
		{name: "replay into a memory backend", env: db, args: []string{"dlq", "replay", "1", "--backend", "memory://"}, wantCode: exitUsage,
			wantErr: []string{"memory://", "another process", "--backend"}},
		{name: "status after a replay", env: withRedis, args: []string{"status"}, wantCode: exitOK,
			wantOut: []string{replayed}},
		{name: "migrate help", args: []string{"migrate", "--help"}, wantCode: exitOK,
			wantErr: []string{"Usage: txmq migrate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, fail := runExpect(t, tt.env, tt.args, tt.wantCode, tt.wantOut, tt.wantErr)
			for _, w := range tt.notErr {
				if strings.Contains(errOut, w) {
					fail("stderr has " + w)
				}
			}
			if m := apiName.FindString(out + errOut); m != "" {
				fail("names a Go API: " + m)
			}
			for _, line := range strings.Split(errOut, "\n") {
				if n := len(prefix.FindAllString(line, -1)); n > 1 {
					fail("more than one prefix on a line: " + line)
				}
				if strings.Count(line, "connection refused") > 1 || strings.Count(errOut, "connection refused") > 1 {
					fail("the cause is repeated")
				}
			}
			if strings.Count(out+errOut, "(default") > 1 {
				fail("a default is printed twice")
			}
		})
	}
	// The replayed batch is counted in the backend (which also lists the other busy queues of
	// the shared Redis).
	out, _, _ := runBinaryOut(t, withRedis, "status", "--json")
	var rows []queueStatus
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	found := false
	for _, r := range rows {
		found = found || r.Queue == replayed && r.Ready != nil && *r.Ready == 1 && r.DeadLetters != nil
	}
	if !found {
		t.Fatalf("status after replay: no row of %s with 1 ready batch and its dead letters counted: %s", replayed, out)
	}
}

// TestReadmeTroubleshooting runs the built binary over the errors the Troubleshooting section
// (docs/operations.md, or wherever README.md and docs/*.md hold it) shows and checks that it
// shows what the command prints.
func TestReadmeTroubleshooting(t *testing.T) {
	t.Parallel()
	name, doc := testenv.DocWith(t, "../..", "\n### Troubleshooting\n")
	_, section, _ := strings.Cut(doc, "\n### Troubleshooting\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var shown []string
	for parts := strings.Split(section, "  ```\n"); len(parts) > 2; parts = parts[2:] {
		var lines []string
		for _, l := range strings.Split(strings.TrimSuffix(parts[1], "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "  "))
		}
		shown = append(shown, strings.Join(lines, "\n")+"\n")
	}
	pgURL := testenv.PostgresURL(t)
	schema := "missing_" + strings.TrimPrefix(testenv.UniqueName("s"), "s")
	runs := []struct {
		env      []string
		args     []string
		wantCode int
		replace  []string // old, new pairs applied to stderr
	}{
		{[]string{"TXMQ_DATABASE_URL=" + pgURL}, []string{"dlq", "ls", "--schema", schema}, exitError, []string{schema, "app"}},
		{nil, []string{"status", "--database-url", "postgres://app@127.0.0.1:1/app"}, exitError, []string{"127.0.0.1:1", "127.0.0.1:5433"}},
		{nil, []string{"status", "--backend", "memory://", "--queue", "emails"}, exitUsage, nil},
	}
	if len(shown) != len(runs) {
		t.Fatalf("%s's Troubleshooting shows %d outputs, want %d", name, len(shown), len(runs))
	}
	for i, r := range runs {
		_, errOut, code := runBinaryOut(t, r.env, r.args...)
		for j := 0; j+1 < len(r.replace); j += 2 {
			errOut = strings.ReplaceAll(errOut, r.replace[j], r.replace[j+1])
		}
		if code != r.wantCode || errOut != shown[i] {
			t.Errorf("txmq %s: exit %d (want %d), printed:\n%s\n%s shows:\n%s", strings.Join(r.args, " "), code, r.wantCode, errOut, name, shown[i])
		}
	}
}
