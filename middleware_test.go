package txmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestPublishMiddlewareRefusesBadOutput: what a publish middleware leaves is checked before
// anything is published: one payload and one header entry per message, payloads that are
// JSON, valid headers; a panic is an error. Each error names the queue, and nothing of the
// call is published.
func TestPublishMiddlewareRefusesBadOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(p *txmq.PublishRequest)
		want   string
	}{
		{"payload dropped", func(p *txmq.PublishRequest) { p.Payloads = p.Payloads[:1] }, "1 payloads and 2 header entries for 2 messages"},
		{"header entry dropped", func(p *txmq.PublishRequest) { p.Headers = p.Headers[:1] }, "2 payloads and 1 header entries"},
		{"raw bytes", func(p *txmq.PublishRequest) { p.Payloads[1] = []byte{0xde, 0xad} }, "message 1: publish middleware left a payload that is not JSON"},
		{"empty payload", func(p *txmq.PublishRequest) { p.Payloads[0] = nil }, "message 0: publish middleware left a payload that is not JSON"},
		{"empty header key", func(p *txmq.PublishRequest) { p.Headers[0] = map[string]string{"": "x"} }, "a header key is empty"},
		{"invalid UTF-8", func(p *txmq.PublishRequest) { p.Headers[1] = map[string]string{"k": "\xff"} }, "not valid UTF-8"},
		{"too large", func(p *txmq.PublishRequest) {
			p.Headers[0] = map[string]string{"k": strings.Repeat("x", txmq.MaxHeaderBytes)}
		}, "more than MaxHeaderBytes"},
		{"panic", func(*txmq.PublishRequest) { panic("boom") }, "publish middleware panicked: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := txmq.NewRegistry()
			name := testenv.UniqueName("mw")
			q := txmq.MustDeclareIn(reg, name, txmq.QueueConfig[int]{Transactional: txmq.Never,
				PublishMiddleware: []txmq.PublishMiddleware{func(next txmq.PublishHandler) txmq.PublishHandler {
					return func(ctx context.Context, p *txmq.PublishRequest) error {
						tc.change(p)
						return next(ctx, p)
					}
				}}})
			be := memory.New(nil)
			defer be.Close()
			n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close(context.Background())
			err = q.PublishMany(context.Background(), n, []int{1, 2})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), name) {
				t.Fatalf("PublishMany: %v; want an error naming queue %q and saying %q", err, name, tc.want)
			}
			if tc.name != "panic" && !errors.Is(err, core.ErrInvalidPayload) {
				t.Fatalf("PublishMany: %v; want ErrInvalidPayload", err)
			}
			if s := n.Stats(); s.Buffered != 0 {
				t.Fatalf("%d messages buffered after a refused call; want none", s.Buffered)
			}
		})
	}
}

// TestHeadersOptionChecked: the Headers option's map is checked at the call, naming the
// queue, without middleware too.
func TestHeadersOptionChecked(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	name := testenv.UniqueName("hdr")
	q := txmq.MustDeclareIn(reg, name, txmq.QueueConfig[int]{Transactional: txmq.Never})
	be := memory.New(nil)
	defer be.Close()
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	err = q.Publish(context.Background(), n, 1, txmq.Headers(map[string]string{"": "v"}))
	if !errors.Is(err, core.ErrInvalidPayload) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Publish with an empty header key: %v; want ErrInvalidPayload naming %q", err, name)
	}
}

// TestRunMiddlewarePayloadThatDoesNotDecode: payloads a run middleware leaves that do not
// decode into the queue's type fail the run permanently: dead-lettered at once, OnError
// called with no messages (none decoded); the listener never runs.
func TestRunMiddlewarePayloadThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	var (
		mu      sync.Mutex
		onErr   error
		onMsgs  []int
		ran     bool
		errSeen = make(chan struct{})
	)
	q := txmq.MustDeclareIn(reg, testenv.UniqueName("undec"), txmq.QueueConfig[int]{Transactional: txmq.Never,
		RunMiddleware: []txmq.RunMiddleware{func(next txmq.RunHandler) txmq.RunHandler {
			return func(ctx context.Context, r *txmq.RunRequest) error {
				r.Payloads[0] = json.RawMessage(`"not an int"`)
				return next(ctx, r)
			}
		}},
		OnError: func(msgs []int, err error, _ int) error {
			mu.Lock()
			onErr, onMsgs = err, msgs
			mu.Unlock()
			close(errSeen)
			return nil
		}})
	be := memory.New(nil)
	defer be.Close()
	n := txmqtest.StartNode(t, be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err := q.Listen(n, func(context.Context, []int) error {
		mu.Lock()
		ran = true
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(context.Background(), n, 7); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errSeen:
	case <-time.After(20 * time.Second):
		t.Fatal("OnError not called")
	}
	mu.Lock()
	defer mu.Unlock()
	if ran || !errors.Is(onErr, core.ErrUndecodable) || !core.IsPermanent(onErr) || onMsgs != nil {
		t.Fatalf("listener ran %v, OnError(%v, %v); want no run and a permanent ErrUndecodable with no messages", ran, onMsgs, onErr)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return n.Stats().Dropped[txmq.ReasonPermanent] == 1 }, "dropped as permanent")
}

// TestRunMiddlewareMessageCountKept: a run middleware that drops a payload or a header entry
// fails the run permanently, naming the queue; the listener never sees a slice that does not
// match the batch's ids.
func TestRunMiddlewareMessageCountKept(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(r *txmq.RunRequest){
		"payload": func(r *txmq.RunRequest) { r.Payloads = r.Payloads[:1] },
		"header":  func(r *txmq.RunRequest) { r.Headers = append(r.Headers, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reg := txmq.NewRegistry()
			qname := testenv.UniqueName("count")
			dropped := make(chan error, 1)
			q := txmq.MustDeclareIn(reg, qname, txmq.QueueConfig[int]{Transactional: txmq.Never,
				RunMiddleware: []txmq.RunMiddleware{func(next txmq.RunHandler) txmq.RunHandler {
					return func(ctx context.Context, r *txmq.RunRequest) error {
						change(r)
						return next(ctx, r)
					}
				}},
				OnError: func(_ []int, err error, _ int) error { dropped <- err; return nil }})
			be := memory.New(nil)
			defer be.Close()
			n := txmqtest.StartNode(t, be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
			if err := q.Listen(n, func(context.Context, []int) error {
				t.Error("the listener ran")
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := q.PublishMany(context.Background(), n, []int{1, 2}); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-dropped:
				if !core.IsPermanent(err) || !strings.Contains(err.Error(), qname) || !strings.Contains(err.Error(), "for 2 messages") {
					t.Fatalf("OnError got %v; want a permanent error naming the queue and the count", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("OnError not called")
			}
		})
	}
}

// TestMessageHeadersOutsideListener: MessageHeaders is nil outside a listener and for a
// batch without headers.
func TestMessageHeadersOutsideListener(t *testing.T) {
	t.Parallel()
	if h := txmq.MessageHeaders(context.Background()); h != nil {
		t.Fatalf("MessageHeaders(Background) = %v; want nil", h)
	}
}
