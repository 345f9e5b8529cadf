package txmq

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestCheckUniqueConfig: a Unique is one of the modes with the window it needs (and none it
// does not), and does not meet IDDedupWindow, nor an Ordered queue when it debounces.
func TestCheckUniqueConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		u        Unique
		ordered  bool
		idWindow time.Duration
		want     string // a part of the error; empty: valid
	}{
		{name: "off", u: Unique{}},
		{name: "window", u: Unique{Mode: UniqueWindow, Window: time.Minute}},
		{name: "until started", u: Unique{Mode: UniqueUntilStarted}},
		{name: "until done by payload", u: Unique{Mode: UniqueUntilDone, ByPayload: true}},
		{name: "debounce", u: Unique{Mode: UniqueDebounce, Window: time.Second}},
		{name: "until done ordered", u: Unique{Mode: UniqueUntilDone}, ordered: true},
		{name: "window without mode", u: Unique{Window: time.Second}, want: "no Mode"},
		{name: "by payload without mode", u: Unique{ByPayload: true}, want: "no Mode"},
		{name: "unknown mode", u: Unique{Mode: 9}, want: "is not one of"},
		{name: "window without window", u: Unique{Mode: UniqueWindow}, want: "needs a Window"},
		{name: "debounce sub-millisecond", u: Unique{Mode: UniqueDebounce, Window: time.Microsecond}, want: "needs a Window"},
		{name: "until done with window", u: Unique{Mode: UniqueUntilDone, Window: time.Second}, want: "drop Window"},
		{name: "debounce ordered", u: Unique{Mode: UniqueDebounce, Window: time.Second}, ordered: true, want: "is Ordered"},
		{name: "with id dedup", u: Unique{Mode: UniqueUntilStarted}, idWindow: time.Minute, want: "IDDedupWindow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkUniqueConfig("q1", tc.u, tc.ordered, tc.idWindow)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tc.want != "" && (err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"q1"`)):
				t.Fatalf("got %v, want ErrInvalidConfig naming the queue and containing %q", err, tc.want)
			}
		})
	}
}

// TestSetUnique: each message gets its key from UniqueKey, else its payload's hash with
// ByPayload, else its caller id, else none; a debounce is due Window from now unless later;
// UniqueKey is an error without Unique, on several messages and when it is not a valid key.
func TestSetUnique(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	spec := func(mode UniqueMode, window time.Duration, byPayload bool) *queueSpec {
		s := &queueSpec{uniqueByPayload: byPayload}
		s.Name, s.Unique = "q1", core.Unique{Mode: mode, Window: window}
		return s
	}
	msgs := func(ids ...string) []core.Message {
		out := make([]core.Message, len(ids))
		for i, id := range ids {
			out[i] = core.Message{ID: id, Body: []byte(`"` + id + `"`)}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		spec    *queueSpec
		o       publishOptions
		msgs    []core.Message
		due     time.Time
		keys    []string
		wantDue time.Time
		err     string
	}{
		{name: "not unique", spec: spec(0, 0, false), msgs: msgs("a"), keys: []string{""}},
		{name: "key option", spec: spec(UniqueUntilDone, 0, false), o: publishOptions{uniqueKey: "k1", uniqueSet: true, ids: []string{"a"}}, msgs: msgs("a"), keys: []string{"k1"}},
		{name: "caller ids", spec: spec(UniqueUntilDone, 0, false), o: publishOptions{ids: []string{"a", "b"}}, msgs: msgs("a", "b"), keys: []string{"a", "b"}},
		{name: "generated ids", spec: spec(UniqueUntilDone, 0, false), msgs: msgs("g1"), keys: []string{""}},
		{name: "by payload", spec: spec(UniqueUntilStarted, 0, true), o: publishOptions{ids: []string{"a"}}, msgs: msgs("a"),
			keys: []string{"ac8d8342bbb2362d13f0a559a3621bb407011368895164b628a54f7fc33fc43c"}}, // sha256(`"a"`)
		{name: "debounce due", spec: spec(UniqueDebounce, time.Second, false), o: publishOptions{uniqueKey: "k", uniqueSet: true}, msgs: msgs("a"), keys: []string{"k"}, wantDue: now.Add(time.Second)},
		{name: "debounce later due kept", spec: spec(UniqueDebounce, time.Second, false), o: publishOptions{uniqueKey: "k", uniqueSet: true}, msgs: msgs("a"), due: now.Add(time.Hour), keys: []string{"k"}, wantDue: now.Add(time.Hour)},
		{name: "debounce without key not delayed", spec: spec(UniqueDebounce, time.Second, false), msgs: msgs("g"), keys: []string{""}},
		{name: "key without unique", spec: spec(0, 0, false), o: publishOptions{uniqueKey: "k", uniqueSet: true}, msgs: msgs("a"), err: "has no Unique mode"},
		{name: "key on many", spec: spec(UniqueUntilDone, 0, false), o: publishOptions{uniqueKey: "k", uniqueSet: true}, msgs: msgs("a", "b"), err: "call of 2 messages"},
		{name: "bad key", spec: spec(UniqueUntilDone, 0, false), o: publishOptions{uniqueKey: "a b", uniqueSet: true}, msgs: msgs("a"), err: "printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			due, err := setUnique(tc.spec, tc.o, tc.msgs, tc.due, clock)
			if tc.err != "" {
				if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `"q1"`) {
					t.Fatalf("got %v, want ErrInvalidConfig naming the queue and containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !due.Equal(tc.wantDue) {
				t.Errorf("due %v, want %v", due, tc.wantDue)
			}
			for i, m := range tc.msgs {
				if m.Unique != tc.keys[i] {
					t.Errorf("message %d: key %q, want %q", i, m.Unique, tc.keys[i])
				}
			}
		})
	}
}

// TestUniqueThroughPublishMiddleware: a publish that goes through publish middleware keeps its
// unique key (the key as the app published it), so a repeat is still left out.
func TestUniqueThroughPublishMiddleware(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := NewRegistry()
	rewrite := func(next PublishHandler) PublishHandler {
		return func(ctx context.Context, p *PublishRequest) error {
			for i := range p.Payloads {
				p.Payloads[i] = json.RawMessage(`"rewritten"`)
			}
			return next(ctx, p)
		}
	}
	q := MustDeclareIn(reg, "unique-mw", QueueConfig[string]{Transactional: Try, Unique: Unique{Mode: UniqueUntilDone}, PublishMiddleware: []PublishMiddleware{rewrite}})
	app, err := Open(ctx, &Config{Backend: "memory://", Node: NodeOptions{Registry: reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = app.Close(ctx) }()
	for range 2 {
		if err := q.Publish(ctx, app.Node, "x", UniqueKey("k")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for app.Node.Stats().Buffered > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	d, err := app.Node.Depths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := d[q.Name()].Ready; got != 1 || app.Node.Stats().Deduplicated != 1 {
		t.Fatalf("%d batches stored, %d left out; want 1 and 1 (the repeat's key kept through the middleware)", got, app.Node.Stats().Deduplicated)
	}
}
