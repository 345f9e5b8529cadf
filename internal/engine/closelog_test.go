package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// recordHandler is a slog.Handler that sends each record whose message starts with prefix,
// with its attributes, to out.
type recordHandler struct {
	prefix string
	out    chan<- logLine
}

// logLine is one record a recordHandler saw.
type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, h.prefix) {
		return nil
	}
	l := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value.String(); return true })
	h.out <- l
	return nil
}

// TestCloseSpeaks: Close logs at once what it waits for (the running batches by queue, the
// buffered messages), again while it waits, and at the end what it did (the run it cut short,
// the buffered messages it published, or handed to the outbox when the backend refused them).
func TestCloseSpeaks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		refuse                  bool
		wantPublished, wantHand string
	}{
		{name: "backend takes the buffer", wantPublished: "3", wantHand: "0"},
		{name: "backend refuses the buffer", refuse: true, wantPublished: "0", wantHand: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			closeSpeaks(t, tc.refuse, tc.wantPublished, tc.wantHand)
		})
	}
}

// closeSpeaks runs TestCloseSpeaks' case: refuse makes the backend refuse every publish.
func closeSpeaks(t *testing.T, refuse bool, wantPublished, wantHanded string) {
	lines := make(chan logLine, 1024)
	fb := &fakeBackend{}
	if refuse {
		fb.PublishErr = core.ErrBackendUnavailable
	}
	var once sync.Once
	fb.FetchFn = func(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
		var cs []*core.Claim
		once.Do(func() {
			cs = []*core.Claim{{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Minute)}}
		})
		if cs == nil {
			<-ctx.Done()
		}
		return cs, nil
	}
	n, err := txmq.NewNode(fb, &txmq.NodeOptions{
		Registry: txmq.NewRegistry(),
		Logger:   slog.New(recordHandler{prefix: "txmq: ", out: lines}),
		Handoff:  &handoffRecorder{},
		// The buffer holds what is published until Close flushes it.
		FlushWindow: time.Hour, FlushCap: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	engine.Of(n).SetCloseLogEvery(10 * time.Millisecond)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Never})
	idle := txmq.MustDeclareIn(n.Registry(), "idle", txmq.QueueConfig[int]{Transactional: txmq.Never})
	started := make(chan struct{})
	if err := q.Listen(n, func(ctx context.Context, _ []int) error {
		close(started)
		<-ctx.Done() // blocks until Close gives up waiting
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := idle.Publish(context.Background(), n, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() { closed <- n.Close(ctx) }()
	next := func(prefix string) logLine {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l := <-lines:
				if strings.HasPrefix(l.msg, prefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("no log line %q within 10s", prefix)
			}
		}
	}
	first := next("txmq: closing:")
	if first.attrs["running_batches"] != "1" || first.attrs["queues"] != "q=1" || first.attrs["buffered_messages"] != "3" {
		t.Fatalf("first line %q %v; want running_batches=1 queues=q=1 buffered_messages=3", first.msg, first.attrs)
	}
	still := next("txmq: still closing:")
	if still.attrs["running_batches"] != "1" || still.attrs["queues"] != "q=1" {
		t.Fatalf("reminder %q %v; want running_batches=1 queues=q=1", still.msg, still.attrs)
	}
	cancel() // the operator's bound: the blocked run is cut short
	last := next("txmq: closed")
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Fatalf("Close returned %v; want context.Canceled", err)
	}
	if last.level != slog.LevelWarn || last.attrs["runs_cut_short"] != "1" || last.attrs["messages_published"] != wantPublished || last.attrs["batches_handed_to_outbox"] != wantHanded {
		t.Fatalf("last line %s %q %v; want a warning with runs_cut_short=1 messages_published=%s batches_handed_to_outbox=%s", last.level, last.msg, last.attrs, wantPublished, wantHanded)
	}
}

// TestCloseQuietWhenIdle: a Close with nothing running and nothing buffered logs its two
// lines at debug level only.
func TestCloseQuietWhenIdle(t *testing.T) {
	t.Parallel()
	lines := make(chan logLine, 64)
	n, err := txmq.NewNode(&fakeBackend{}, &txmq.NodeOptions{
		Registry: txmq.NewRegistry(),
		Logger:   slog.New(recordHandler{prefix: "txmq: clos", out: lines}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(lines)
	got := 0
	for l := range lines {
		got++
		if l.level != slog.LevelDebug {
			t.Errorf("%s %q %v; want debug level: Close waited for nothing", l.level, l.msg, l.attrs)
		}
	}
	if got != 2 {
		t.Fatalf("%d lines from Close; want 2 (closing, closed)", got)
	}
}
