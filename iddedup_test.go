package txmq

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// dedupFake is the fake backend with id dedup (one message per batch when single is set).
type dedupFake struct {
	*fakeBackend
	single bool
	max    time.Duration
}

func (d dedupFake) DedupIDs() (core.DedupSupport, error) {
	return core.DedupSupport{OnePerBatch: d.single, MaxWindow: d.max}, nil
}

func idPending(spec *queueSpec, callerIDs bool, single bool, ids ...string) *core.Pending {
	msgs := make([]core.Message, len(ids))
	for i, id := range ids {
		msgs[i] = core.Message{ID: id, Body: []byte(`"` + id + `"`)}
	}
	return &core.Pending{Queue: spec.name, Messages: msgs, Batcher: &pendingMeta{spec: spec, callerIDs: callerIDs, onePerBatch: single}}
}

// TestBatchesDedupIDs: on a queue with an IDDedupWindow, caller-id messages go in batches of
// their own asking for dedup (their envelope says so too), the first of a repeated id is kept,
// generated-id messages go in plain batches, and a backend that deduplicates whole batches
// gets one message per batch. Without a window nothing asks for dedup.
func TestBatchesDedupIDs(t *testing.T) {
	t.Parallel()
	type want struct {
		ids    []string
		window time.Duration
	}
	for _, tc := range []struct {
		name   string
		window time.Duration
		single bool
		want   []want
	}{
		{"no window", 0, false, []want{{[]string{"g1", "a", "b", "g2", "a", "c"}, 0}}},
		{"window", time.Minute, false, []want{{[]string{"g1", "g2"}, 0}, {[]string{"a", "b", "c"}, time.Minute}}},
		{"window, one per batch", time.Minute, true, []want{{[]string{"g1", "g2"}, 0}, {[]string{"a"}, time.Minute}, {[]string{"b"}, time.Minute}, {[]string{"c"}, time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := &queueSpec{name: "q", maxBatch: 10, idWindow: tc.window}
			ps := []*core.Pending{
				idPending(spec, false, tc.single, "g1"),
				idPending(spec, true, tc.single, "a", "b"),
				idPending(spec, false, tc.single, "g2"),
				idPending(spec, true, tc.single, "a", "c"),
			}
			bs, err := core.Batches(ps, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, b := range bs {
				env, err := envelope.Decode(b.Body)
				if err != nil {
					t.Fatal(err)
				}
				if b.DedupWindow > 0 && (!slices.Equal(b.DedupIDs, env.MessageIDs) || env.DedupMillis != b.DedupWindow.Milliseconds()) {
					t.Fatalf("batch %q: DedupIDs %q, envelope dw %d, window %v", env.MessageIDs, b.DedupIDs, env.DedupMillis, b.DedupWindow)
				}
				if b.DedupWindow == 0 && (b.DedupIDs != nil || env.DedupMillis != 0) {
					t.Fatalf("plain batch %q asks for dedup", env.MessageIDs)
				}
				got = append(got, want{env.MessageIDs, b.DedupWindow})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("batches %v, want %v", got, tc.want)
			}
			for i := range got {
				if !slices.Equal(got[i].ids, tc.want[i].ids) || got[i].window != tc.want[i].window {
					t.Fatalf("batches %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestIDDedupRefused: a queue with an IDDedupWindow is refused by a node whose backend cannot
// deduplicate ids (at NewNode, Listen and Publish), or not for that long; a negative window
// fails the declaration.
func TestIDDedupRefused(t *testing.T) {
	t.Parallel()
	check := func(call string, err error, queue, what string) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q and %q", call, err, queue, what)
		}
	}
	reg := NewRegistry()
	MustDeclareIn(reg, "early", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Minute})
	_, err := NewNode(&fakeBackend{}, &NodeOptions{Registry: reg, Logger: quietLogger()})
	check("NewNode", err, "early", "fakeBackend")
	reg2 := NewRegistry()
	n := newTestNodeOn(t, &fakeBackend{}, &NodeOptions{Registry: reg2})
	q := MustDeclareIn(reg2, "late", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Minute})
	check("Listen", q.Listen(n, func(context.Context, []int) error { return nil }), "late", "fakeBackend")
	check("Publish", q.Publish(context.Background(), n, 1, ID("x")), "late", "fakeBackend")
	reg3 := NewRegistry()
	MustDeclareIn(reg3, "long", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Hour})
	_, err = NewNode(dedupFake{fakeBackend: &fakeBackend{}, max: 5 * time.Minute}, &NodeOptions{Registry: reg3, Logger: quietLogger()})
	check("NewNode (window too long)", err, "long", "5m0s")
	_, err = DeclareIn(NewRegistry(), "neg", QueueConfig[int]{Transactional: Try, IDDedupWindow: -time.Second})
	check("DeclareIn", err, "neg", "IDDedupWindow")
}

// TestDeduplicatedCounted: a node counts the repeats it leaves out, whether they met in one
// flush or the backend refused them, and stores each id once.
func TestDeduplicatedCounted(t *testing.T) {
	t.Parallel()
	be := memory.New(nil)
	defer be.Close()
	n := newTestNodeOn(t, be, &NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	q := MustDeclareIn(n.Registry(), "q", QueueConfig[int]{Transactional: Try, IDDedupWindow: time.Minute})
	ctx := context.Background()
	for _, id := range []string{"a", "b", "a"} { // one flush: the second a is left out there
		if err := q.Publish(ctx, n, 1, ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(ctx, n, 2, After(time.Hour), ID("b")); err != nil { // another due time
		t.Fatal(err)
	}
	n.flushAll(ctx)
	if err := q.PublishMany(ctx, n, []int{1, 2}, IDs("c", "a")); err != nil { // the backend refuses a
		t.Fatal(err)
	}
	n.flushAll(ctx)
	st := n.Stats()
	if st.Deduplicated != 3 || st.PublishedMessages != 3 {
		t.Fatalf("Deduplicated %d, PublishedMessages %d; want 3 and 3 (a, b, c once each)", st.Deduplicated, st.PublishedMessages)
	}
}
