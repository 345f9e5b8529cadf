package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestMsgCancelWhereExitCodes runs the built command's bulk cancel and run-now against SQL
// jobs (which can do both) and Redis (which can do neither): an unknown queue exits 1, no
// --yes in a script exits 2 and changes nothing, a bad state exits 2, a backend that cannot
// exits 1 saying so; --yes cancels every delayed message and leaves the ready one, and
// run-now makes the delayed batch ready.
func TestMsgCancelWhereExitCodes(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	jobsURL := testenv.PostgresURL(t) + "&txmq_schema=" + schema
	ctx := context.Background()
	be, err := core.OpenBackend(ctx, jobsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	queue := testenv.UniqueName("bulk")
	for _, delay := range []time.Duration{time.Hour, time.Hour, 0} {
		b := parity.EncodeBatch(queue, nil, json.RawMessage(`"x"`), json.RawMessage(`"y"`))
		b.Delay = delay
		if err := be.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	hurry := testenv.UniqueName("hurry")
	later := parity.EncodeBatch(hurry, nil, json.RawMessage(`"x"`), json.RawMessage(`"y"`))
	later.Delay = time.Hour
	if err := be.Publish(ctx, later); err != nil {
		t.Fatal(err)
	}
	jobs := []string{"TXMQ_BACKEND=" + jobsURL}
	// SQS can neither take a message back nor make a waiting batch due (memory, SQL jobs and
	// Redis can): the queues exist there, so that the unknown-queue check passes first.
	sqsURL := "sqs://test:test@us-east-1?txmq_endpoint=" + testenv.SQSEndpoint(t) + "&txmq_prefix=" + testenv.UniqueName("cli") + "-"
	sqsBE, err := core.OpenBackend(ctx, sqsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqsBE.Close() })
	for _, q := range []string{queue, hurry} {
		b := parity.EncodeBatch(q, nil, json.RawMessage(`"x"`))
		b.Delay = time.Hour
		if err := sqsBE.Publish(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	cannot := []string{"TXMQ_BACKEND=" + sqsURL}
	cancel := []string{"msg", "cancel", "--queue", queue, "--state", "delayed"}
	runNow := []string{"msg", "run-now", "--queue", hurry, "--state", "delayed"}
	for _, tt := range []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     string
	}{
		{"unknown queue", jobs, []string{"msg", "cancel", "--queue", "nosuch", "--state", "delayed", "--yes"}, exitError, `unknown queue: --queue "nosuch"`},
		{"without --yes", jobs, cancel, exitUsage, "add --yes"},
		{"running state", jobs, []string{"msg", "cancel", "--queue", queue, "--state", "running", "--yes"}, exitUsage, "a running batch is not interrupted"},
		{"backend that cannot cancel", cannot, append(cancel, "--yes"), exitError, "cannot take a message back"},
		{"--yes", jobs, append(cancel, "--yes"), exitOK, "cancelled 4 delayed message(s) of " + queue},
		{"run-now unknown queue", jobs, []string{"msg", "run-now", "--queue", "nosuch", "--state", "delayed", "--yes"}, exitError, `unknown queue: --queue "nosuch"`},
		{"run-now without --yes", jobs, runNow, exitUsage, "add --yes"},
		{"run-now of queued messages", jobs, []string{"msg", "run-now", "--queue", hurry, "--state", "queued", "--yes"}, exitUsage, "use one of delayed, retry"},
		{"run-now on a backend that cannot", cannot, append(runNow, "--yes"), exitError, "cannot make a waiting batch due now"},
		{"run-now --yes", jobs, append(runNow, "--yes"), exitOK, "made 2 delayed message(s) of " + hurry + " due now"},
	} {
		before, err := be.Depths(ctx, []string{queue, hurry})
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runBinaryOut(t, tt.env, tt.args...)
		if code != tt.wantCode || !strings.Contains(out+errOut, tt.want) {
			t.Fatalf("%s: txmq %s: exit %d (want %d, and %q)\nstdout:\n%s\nstderr:\n%s", tt.name, strings.Join(tt.args, " "), code, tt.wantCode, tt.want, out, errOut)
		}
		if tt.wantCode != exitOK {
			if d, err := be.Depths(ctx, []string{queue, hurry}); err != nil || d[queue].Delayed != before[queue].Delayed || d[hurry].Delayed != before[hurry].Delayed {
				t.Fatalf("%s: delayed batches after a refused command: %+v, %v; want them unchanged: %+v", tt.name, d, err, before)
			}
		}
	}
	if d, err := be.Depths(ctx, []string{hurry}); err != nil || d[hurry].Delayed != 0 || d[hurry].Ready != 1 {
		t.Fatalf("after run-now: %+v, %v; want the batch ready", d[hurry], err)
	}
	if d, err := be.Depths(ctx, []string{queue}); err != nil || d[queue].Delayed != 0 || d[queue].Ready != 1 {
		t.Fatalf("after the bulk cancel: %+v, %v; want the ready batch only", d[queue], err)
	}
}
