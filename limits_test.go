package txmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// limitedBackend is a fakeBackend that reports a native batch size limit.
type limitedBackend struct {
	fakeBackend
	limit int
}

func (b *limitedBackend) MaxBatchBytes() int { return b.limit }

func TestOversizePublishRefusedAtCallSite(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 2000) // a 2002-byte JSON string
	for _, tc := range []struct {
		name    string
		node    NodeOptions
		queue   QueueConfig[string]
		native  int
		ok      bool
		wantIn  []string // the error names these
		inTx    bool
		batchOK bool
	}{
		{name: "node limit", node: NodeOptions{MaxMessageBytes: 1000}, wantIn: []string{"2002 bytes", "1000", "NodeOptions.MaxMessageBytes"}},
		{name: "node limit in a transaction", node: NodeOptions{MaxMessageBytes: 1000}, inTx: true, wantIn: []string{"2002 bytes", "1000", "MaxMessageBytes"}},
		{name: "queue override lower", queue: QueueConfig[string]{MaxMessageBytes: 500}, wantIn: []string{"500", "QueueConfig.MaxMessageBytes"}},
		{name: "queue override higher", node: NodeOptions{MaxMessageBytes: 1000}, queue: QueueConfig[string]{MaxMessageBytes: 4000}, ok: true},
		{name: "queue no limit", node: NodeOptions{MaxMessageBytes: 1000}, queue: QueueConfig[string]{MaxMessageBytes: NoSizeLimit}, ok: true},
		{name: "backend's own limit", native: 1500, wantIn: []string{"2002 bytes", "backend"}},
		{name: "backend's limit beats a queue's no limit", native: 1500, queue: QueueConfig[string]{MaxMessageBytes: NoSizeLimit}, wantIn: []string{"backend"}},
		{name: "within every limit", native: 1 << 20, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := tc.node
			var n *Node
			var fb *fakeBackend
			if tc.native > 0 {
				lb := &limitedBackend{limit: tc.native}
				n, fb = newTestNodeOn(t, lb, &o), &lb.fakeBackend
			} else {
				n, fb = newTestNode(t, &o)
			}
			cfg := tc.queue
			cfg.Transactional = Try
			q := MustDeclareIn(n.Registry(), "sized", cfg)
			ctx := context.Background()
			tx := &fakeTx{}
			if tc.inTx {
				ctx = core.ContextWithTx(ctx, tx)
			}
			err := q.PublishMany(ctx, n, []string{"small", big})
			if tc.ok {
				if err != nil {
					t.Fatalf("publish within the limits: %v", err)
				}
				return
			}
			if !errors.Is(err, core.ErrRejected) || !errors.Is(err, core.ErrInvalidPayload) {
				t.Fatalf("got %v, want an error wrapping ErrRejected and ErrInvalidPayload", err)
			}
			for _, s := range append([]string{`"sized"`}, tc.wantIn...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			_ = n.Close(context.Background())
			if len(tx.Staged) != 0 || len(fb.Batches()) != 0 {
				t.Fatalf("part of a refused call was published: %d staged, %d stored", len(tx.Staged), len(fb.Batches()))
			}
		})
	}
}

func TestSizeSettingsValidated(t *testing.T) {
	t.Parallel()
	if _, err := NewNode(&fakeBackend{}, &NodeOptions{MaxMessageBytes: 4 << 20, MaxBatchBytes: 1 << 20}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxBatchBytes") {
		t.Fatalf("MaxBatchBytes below MaxMessageBytes: %v", err)
	}
	if _, err := DeclareIn(NewRegistry(), "q", QueueConfig[int]{Transactional: Try, MaxMessageBytes: -5}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("MaxMessageBytes -5: %v", err)
	}
	if _, err := DeclareIn(NewRegistry(), "q", QueueConfig[int]{Transactional: Try, MaxBatchBytes: -2}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("MaxBatchBytes -2: %v", err)
	}
}

func TestBatchesCutByBytes(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, &NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, MaxMessageBytes: 1000, MaxBatchBytes: 4000})
	q := MustDeclareIn(n.Registry(), "q", QueueConfig[string]{Transactional: Try})
	msgs := make([]string, 40)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("%03d%s", i, strings.Repeat("y", 900))
	}
	tx := &fakeTx{}
	if err := q.PublishMany(core.ContextWithTx(context.Background(), tx), n, msgs); err != nil {
		t.Fatal(err)
	}
	if err := q.PublishMany(context.Background(), n, msgs); err != nil {
		t.Fatal(err)
	}
	staged, err := core.Batches(tx.Staged, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_ = n.Close(context.Background())
	for name, bs := range map[string][]core.OutgoingBatch{"outbox": staged, "buffer": fb.Batches()} {
		total := 0
		for _, b := range bs {
			if len(b.Body) > 4000 {
				t.Errorf("%s: batch of %d bytes (%d messages) over MaxBatchBytes 4000", name, len(b.Body), b.Messages)
			}
			total += b.Messages
		}
		if total != 40 || len(bs) < 10 {
			t.Errorf("%s: %d messages in %d batches, want 40 in at least 10", name, total, len(bs))
		}
	}
}

func TestRejectedFlushIsDeadLetteredNotHandedOff(t *testing.T) {
	t.Parallel()
	refusal := fmt.Errorf("backend says: %w: value too large", core.ErrRejected)
	for _, tc := range []struct {
		name       string
		sink       *fakeSink
		wantReason string
	}{
		{"with a dead-letter sink", &fakeSink{}, core.ReasonRejected},
		{"without a sink", nil, core.ReasonRejected},
		{"sink fails", &fakeSink{Err: errors.New("db down")}, core.ReasonDeadLetterFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &handoffRecorder{}
			opts := &NodeOptions{Handoff: h}
			if tc.sink != nil {
				opts.DeadLetters = tc.sink
			}
			n, fb := newTestNode(t, opts)
			fb.PublishErr = refusal
			q := MustDeclareIn(n.Registry(), "q", QueueConfig[int]{Transactional: Try})
			_ = q.PublishMany(context.Background(), n, []int{1, 2, 3})
			_ = n.Close(context.Background())
			st := n.Stats()
			if len(h.Got) != 0 || st.HandedOff != 0 {
				t.Fatalf("a rejected batch was handed to the outbox (%d), where it would be retried forever", len(h.Got))
			}
			if st.Dropped[core.ReasonRejected] != 1 || st.Dropped[tc.wantReason] != 1 {
				t.Fatalf("dropped %v, want one %s (and one %s)", st.Dropped, core.ReasonRejected, tc.wantReason)
			}
			if tc.sink != nil {
				if len(tc.sink.Got) != 1 {
					t.Fatalf("%d dead letters, want 1", len(tc.sink.Got))
				}
				dl := tc.sink.Got[0]
				if dl.Reason != core.ReasonRejected || !strings.Contains(dl.Error, "value too large") || dl.Messages != 3 || dl.Queue != "q" || dl.Attempts != 0 {
					t.Fatalf("dead letter %+v", dl)
				}
				if _, err := envelope.Decode(dl.Body); err != nil {
					t.Fatalf("dead letter body is not replayable: %v", err)
				}
			}
		})
	}
}
