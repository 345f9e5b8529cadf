package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txmq/txmq/txmqtest/testenv"
)

func TestCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"no args", nil, exitUsage, "Commands:", ""},
		{"help", []string{"--help"}, exitOK, "demo", ""},
		{"unknown", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"demo bad flag", []string{"demo", "-bogus"}, exitUsage, "", "-bogus"},
		{"demo bad n", []string{"demo", "-n", "0"}, exitUsage, "", "-n must be at least 1"},
		{"demo help", []string{"demo", "-h"}, exitOK, "", "Usage: txmq demo"},
		{"demo", []string{"demo", "-n", "250", "--database-url", ""}, exitOK, "250 signups published one by one", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out.String(), errOut.String())
			}
		})
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildBinary builds the txmq command once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "txmq-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "txmq")
		build := exec.Command("go", "build", "-o", binPath, ".")
		build.Stderr = os.Stderr
		binErr = build.Run()
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

// TestMain removes the built binary. Commands run in-process by the tests may open the
// memory backends the tests fill (the built binary may not: see TestOperatorMessages).
func TestMain(m *testing.M) {
	allowMemoryBackend = true
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// runBinary runs the built command and checks its exit code.
func runBinary(t *testing.T, wantCode int, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("txmq %s: %v", strings.Join(args, " "), err)
	}
	if code != wantCode {
		t.Fatalf("txmq %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, out)
	}
	return string(out)
}

// TestDemoBinary builds the command and runs `txmq demo` as a newcomer would.
func TestDemoBinary(t *testing.T) {
	t.Parallel()
	out := runBinary(t, exitOK, []string{"TXMQ_DATABASE_URL="}, "demo")
	for _, want := range []string{"2000 signups published one by one", "\nsummary (", "  signups    Try, MaxConcurrentBatches 4  2000       2000 ",
		"  invoices   Never, 3 runs                1          1          3            1             1", "dropped batches: delivery_exhausted=1; OnError calls: 1; max in flight on reports: 1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("txmq demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestBinaryAgainstServices runs the built command against the real Postgres and Redis: the
// operator's commands, with their output and exit codes, configured by the environment.
func TestBinaryAgainstServices(t *testing.T) {
	t.Parallel()
	pgURL := testenv.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	env := []string{"TXMQ_DATABASE_URL=" + pgURL, "TXMQ_SCHEMA=" + schema, "TXMQ_BACKEND=" + redisURL}

	if out := runBinary(t, exitOK, env, "migrate"); !strings.Contains(out, "outbox: applied") || !strings.Contains(out, "sqljobs: skipped") {
		t.Fatalf("migrate: %s", out)
	}
	if out := runBinary(t, exitOK, env, "dlq", "ls"); !strings.Contains(out, "no dead letters") {
		t.Fatalf("dlq ls: %s", out)
	}
	runBinary(t, exitError, env, "dlq", "show", "424242")
	if out := runBinary(t, exitError, env, "status", "--queue", "binary-"+schema, "--json"); !strings.Contains(out, "unknown queue") {
		t.Fatalf("status of an unknown queue: %s", out)
	}
	if out := runBinary(t, exitOK, env, "bench", "--messages", "2000"); !strings.Contains(out, "msgs/s") {
		t.Fatalf("bench on redis: %s", out)
	}
	sqlJobs := pgURL + "&txmq_schema=" + schema
	if out := runBinary(t, exitOK, env, "bench", "--backend", sqlJobs, "--messages", "1000"); !strings.Contains(out, "msgs/s") {
		t.Fatalf("bench on sqljobs: %s", out)
	}
	runBinary(t, exitUsage, nil, "status", "--backend", "", "--database-url", "")
	if out := runBinary(t, exitError, nil, "bench", "--backend", "redis://:s3cret@127.0.0.1:1/0", "--messages", "5", "--timeout", "3s"); strings.Contains(out, "s3cret") {
		t.Fatalf("a password leaked into the output: %s", out)
	}
}
