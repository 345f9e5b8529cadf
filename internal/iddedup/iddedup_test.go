package iddedup

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

func batch(ids ...string) core.OutgoingBatch {
	msgs := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		msgs[i] = json.RawMessage(`"` + id + `-body"`)
	}
	env := &envelope.Envelope{ID: "b", Queue: "q", Created: time.Unix(1, 0), DedupMillis: 1000, MessageIDs: ids, Messages: msgs}
	return core.OutgoingBatch{ID: "b", Queue: "q", Body: envelope.Encode(env), Messages: len(ids), DedupWindow: time.Second, DedupIDs: ids}
}

func TestPublish(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ids     []string
		held    []string
		stored  []string // ids of the stored batch; nil: nothing stored
		dropped []string
		wantErr bool
	}{
		{"fresh", []string{"a", "b"}, nil, []string{"a", "b"}, nil, false},
		{"one held", []string{"a", "b", "c"}, []string{"b"}, []string{"a", "c"}, []string{"b"}, false},
		{"all held", []string{"a", "b"}, []string{"a", "b"}, nil, []string{"a", "b"}, false},
		{"unknown id named", []string{"a"}, []string{"zz"}, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stored []string
			pub := func(_ context.Context, b core.OutgoingBatch) error {
				var taken []string
				for _, id := range b.DedupIDs {
					if slices.Contains(tc.held, id) {
						taken = append(taken, id)
					}
				}
				if tc.held != nil && tc.held[0] == "zz" {
					taken = []string{"zz"}
				}
				if len(taken) > 0 {
					return &core.DuplicateError{Queue: b.Queue, IDs: taken[:1]} // one at a time
				}
				env, err := envelope.Decode(b.Body)
				if err != nil {
					t.Fatalf("stored body does not decode: %v", err)
				}
				if !slices.Equal(env.MessageIDs, b.DedupIDs) || len(env.Messages) != b.Messages {
					t.Fatalf("body ids %q, DedupIDs %q, Messages %d", env.MessageIDs, b.DedupIDs, b.Messages)
				}
				stored = env.MessageIDs
				return nil
			}
			out, dropped, err := Publish(context.Background(), pub, batch(tc.ids...))
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, core.ErrDuplicate)) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(stored, tc.stored) || !slices.Equal(dropped, tc.dropped) {
				t.Fatalf("stored %q dropped %q; want %q, %q", stored, dropped, tc.stored, tc.dropped)
			}
			if !tc.wantErr && out.Messages != len(tc.stored) {
				t.Fatalf("returned batch has %d messages, want %d", out.Messages, len(tc.stored))
			}
		})
	}
}

// TestWithoutKeepsEachMessagesTrace: taking duplicates out of a batch whose messages carry
// different trace contexts keeps each remaining message's own context, and the result decodes
// on both decoders (a stale trace index list would make it undecodable).
func TestWithoutKeepsEachMessagesTrace(t *testing.T) {
	t.Parallel()
	b := batch("a", "b", "c")
	env, err := envelope.Decode(b.Body)
	if err != nil {
		t.Fatal(err)
	}
	ta, tb := map[string]string{"traceparent": "A"}, map[string]string{"traceparent": "B"}
	env.SetTraces([]map[string]string{ta, tb}, []int{0, 1, 1})
	b.Body = envelope.Encode(env)
	out, removed, err := Without(b, []string{"a"})
	if err != nil || !slices.Equal(removed, []string{"a"}) {
		t.Fatalf("Without: removed %v, %v", removed, err)
	}
	got, err := envelope.Decode(out.Body)
	if err != nil {
		t.Fatalf("decode after Without: %v", err)
	}
	if _, err := envelope.DecodeTyped[string](out.Body); err != nil {
		t.Fatalf("typed decode after Without: %v", err)
	}
	if !slices.Equal(got.MessageIDs, []string{"b", "c"}) || got.MessageTrace(0)["traceparent"] != "B" || got.MessageTrace(1)["traceparent"] != "B" {
		t.Fatalf("after Without: ids %v, traces %v %v", got.MessageIDs, got.MessageTrace(0), got.MessageTrace(1))
	}
	out, _, err = Without(b, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = envelope.Decode(out.Body)
	if err != nil || got.MessageTrace(0)["traceparent"] != "A" || got.MessageTrace(1)["traceparent"] != "B" {
		t.Fatalf("after taking b out: %v, traces %v %v", err, got.MessageTrace(0), got.MessageTrace(1))
	}
}
