package txmq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

type traceCtxKey struct{}

// tracedPublish is one publish call of the batch-traces table, with the trace context it
// carries ("" for none).
type tracedPublish struct {
	trace string
	msgs  []string
}

// TestBatchesKeepEachMessagesTrace: when publish calls with different trace contexts coalesce,
// every batch carries each of its messages' contexts, through MaxBatchMessages and size cuts and
// Dedup; when they share one, the envelope keeps the single context alone.
func TestBatchesKeepEachMessagesTrace(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 600) // a tracestate that makes the size limit cut
	for _, tc := range []struct {
		name       string
		cfg        QueueConfig[string]
		maxBytes   int
		publishes  []tracedPublish
		wantSingle bool // every batch with Trace alone
	}{
		{"shared", QueueConfig[string]{}, 0, []tracedPublish{{"a", []string{"1"}}, {"a", []string{"2", "3"}}}, true},
		{"untraced", QueueConfig[string]{}, 0, []tracedPublish{{"", []string{"1"}}, {"", []string{"2"}}}, true},
		{"three traces", QueueConfig[string]{}, 0, []tracedPublish{{"a", []string{"1"}}, {"b", []string{"2", "3"}}, {"", []string{"4"}}, {"a", []string{"5"}}}, false},
		{"cut by count", QueueConfig[string]{MaxBatchMessages: 2}, 0, []tracedPublish{{"a", []string{"1"}}, {"b", []string{"2", "3"}}, {"c", []string{"4", "5"}}}, false},
		{"cut by size", QueueConfig[string]{}, 2400, []tracedPublish{{"a" + long, []string{"1", "2"}}, {"b" + long, []string{"3"}}, {"c" + long, []string{"4", "5"}}, {"d" + long, []string{"6"}}}, false},
		{"dedup", QueueConfig[string]{Dedup: func(ms []string) []string {
			return slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == "2" })
		}}, 0, []tracedPublish{{"a", []string{"1"}}, {"b", []string{"2"}}, {"c", []string{"3"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, _ := newTestNode(t, &NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour, MaxBatchBytes: tc.maxBytes, MaxMessageBytes: 100,
				InjectTrace: func(ctx context.Context) map[string]string {
					if s, _ := ctx.Value(traceCtxKey{}).(string); s != "" {
						return map[string]string{"traceparent": s[:1], "tracestate": s[1:]}
					}
					return nil
				}})
			cfg := tc.cfg
			cfg.Transactional = Try
			q := MustDeclareIn(n.Registry(), "traces", cfg)
			tx := &fakeTx{}
			want := map[string]string{} // message -> its trace
			for _, p := range tc.publishes {
				ctx := context.WithValue(core.ContextWithTx(context.Background(), tx), traceCtxKey{}, p.trace)
				if err := q.PublishMany(ctx, n, p.msgs); err != nil {
					t.Fatal(err)
				}
				for _, m := range p.msgs {
					want[`"`+m+`"`] = p.trace
				}
			}
			bs, err := core.Batches(tx.Staged, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, b := range bs {
				if tc.maxBytes > 0 && len(b.Body) > tc.maxBytes {
					t.Errorf("batch of %d bytes over MaxBatchBytes %d", len(b.Body), tc.maxBytes)
				}
				e, err := envelope.Decode(b.Body)
				if err != nil {
					t.Fatal(err)
				}
				shared := true
				for _, m := range e.Messages {
					shared = shared && want[string(m)] == want[string(e.Messages[0])]
				}
				if shared != (e.Traces == nil) || tc.wantSingle && !shared {
					t.Errorf("batch %s: Traces %v, want them only when the messages' contexts differ", b.Body, e.Traces)
				}
				for i, m := range e.Messages {
					seen++
					got := e.MessageTrace(i)
					if s := want[string(m)]; fmt.Sprint(got) != fmt.Sprint(map[string]string{"traceparent": s[:min(1, len(s))], "tracestate": s[min(1, len(s)):]}) && (s != "" || got != nil) {
						t.Errorf("message %s carries %v, want the context of %q", m, got, s)
					}
				}
			}
			if seen != len(want) && tc.cfg.Dedup == nil || tc.cfg.Dedup != nil && seen != len(want)-1 {
				t.Fatalf("%d messages in the batches, want %d", seen, len(want))
			}
		})
	}
}
