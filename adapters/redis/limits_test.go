package redis

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
)

// bigBatch returns an encoded batch of queue with one message of about size bytes.
func bigBatch(queue string, size int) core.OutgoingBatch {
	return parity.EncodeBatch(queue, nil, json.RawMessage(`"`+strings.Repeat("x", size)+`"`))
}

// A batch over the server's proto-max-bulk-len is refused with core.ErrRejected, never
// reported as an outage, whether the adapter catches it before sending (the limit read from
// the server) or the server refuses it (the limit set too high in Options), and the backend
// keeps working.
func TestOversizeBatchRejectedNotUnavailable(t *testing.T) {
	t.Parallel()
	addr := startRedisServer(t, "--proto-max-bulk-len", "1mb")
	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"limit read from the server", 0},
		{"server refuses (Options.MaxBatchBytes too high)", 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := New(&Options{Addr: addr, Prefix: "big", MaxBatchBytes: tc.limit, GoRedisLogs: true})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			ctx := context.Background()
			for range 3 {
				err := be.Publish(ctx, bigBatch("big", 2<<20))
				if !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
					t.Fatalf("publishing 2 MiB to a server with proto-max-bulk-len 1mb: %v; want ErrRejected and not ErrBackendUnavailable", err)
				}
			}
			if err := be.Publish(ctx, bigBatch("big", 1000)); err != nil {
				t.Fatalf("a small publish after the refusals: %v", err)
			}
			if tc.limit == 0 && be.MaxBatchBytes() != 1<<20 {
				t.Fatalf("MaxBatchBytes = %d, want the server's 1 MiB", be.MaxBatchBytes())
			}
		})
	}
}

func TestRejectedClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{replyErr("ERR Protocol error: invalid bulk length"), true},
		{replyErr("ERR string exceeds maximum allowed size (proto-max-bulk-len)"), true},
		{replyErr("LOADING Redis is loading the dataset in memory"), false},
		{replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{errors.New("plain"), false},
	} {
		err := wrapErr("publish", tc.err)
		if got := errors.Is(err, core.ErrRejected); got != tc.want {
			t.Errorf("%v: rejected %v, want %v", tc.err, got, tc.want)
		}
		if tc.want && errors.Is(err, core.ErrBackendUnavailable) {
			t.Errorf("%v: also unavailable", tc.err)
		}
	}
}

// deadLetters records dead letters.
type deadLetters struct {
	mu  sync.Mutex
	got []*core.DeadLetter
}

func (d *deadLetters) DeadLetter(_ context.Context, dl *core.DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, dl)
	return nil
}

func (d *deadLetters) list() []*core.DeadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*core.DeadLetter(nil), d.got...)
}

// Through a node: a flush the server refuses is dead-lettered once (reason rejected), later
// flushes go on, and once the limit is known an oversize publish is refused at the call.
func TestNodeDeadLettersOversizeFlush(t *testing.T) {
	t.Parallel()
	addr := startRedisServer(t, "--proto-max-bulk-len", "1mb")
	be, err := New(&Options{Addr: addr, Prefix: "node", GoRedisLogs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "docs", txmq.QueueConfig[string]{Transactional: txmq.Try, MaxMessageBytes: 4 << 20})
	dl := &deadLetters{}
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, DeadLetters: dl, Logger: txmqtest.DiscardLogger(), FlushWindow: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Publish(ctx, n, strings.Repeat("y", 2<<20)); err != nil {
		t.Fatalf("first oversize publish (limit not known yet): %v", err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return len(dl.list()) == 1 }, "the refused flush dead-lettered")
	if err := q.Publish(ctx, n, "small"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return n.Stats().PublishedMessages == 1 }, "a later flush published")
	err = q.Publish(ctx, n, strings.Repeat("y", 2<<20))
	if !errors.Is(err, core.ErrRejected) || !strings.Contains(err.Error(), `"docs"`) || !strings.Contains(err.Error(), "backend") {
		t.Fatalf("oversize publish once the limit is known: %v; want ErrRejected at the call naming the queue and the backend's limit", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := dl.list()
	if len(got) != 1 || got[0].Reason != core.ReasonRejected || n.Stats().Dropped[core.ReasonRejected] != 1 {
		t.Fatalf("dead letters %+v, dropped %v; want one, reason rejected", got, n.Stats().Dropped)
	}
}
