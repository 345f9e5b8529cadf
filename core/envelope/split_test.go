package envelope_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/envelope"
	inner "github.com/txmq/txmq/internal/envelope"
)

// TestSplit: the parts of a batch hold every message once, in order, each under a new id,
// with the fields of the batch kept and those of its messages set per part.
func TestSplit(t *testing.T) {
	t.Parallel()
	e := &inner.Envelope{Version: inner.Version, ID: core.NewID(), Queue: "q", Attempt: 2, Created: time.Now(), DedupMillis: 60000}
	for i := range 5 {
		e.MessageIDs = append(e.MessageIDs, fmt.Sprint("m", i))
		e.Messages = append(e.Messages, []byte(fmt.Sprint(i)))
	}
	b := core.OutgoingBatch{ID: e.ID, Queue: "q", Body: inner.Encode(e), Delay: time.Second, Exclusive: true, Key: "k",
		Messages: 5, MessageIDs: e.MessageIDs, PublishID: "replay-1", DedupWindow: time.Minute, DedupIDs: e.MessageIDs}
	parts, err := envelope.Split(b)
	if err != nil || len(parts) != 2 {
		t.Fatalf("Split: %d parts, %v", len(parts), err)
	}
	var ids []string
	for _, p := range parts {
		d, err := inner.Decode(p.Body)
		if err != nil {
			t.Fatal(err)
		}
		if p.ID == b.ID || p.ID != d.ID || p.Messages != len(d.Messages) || p.PublishID != "" {
			t.Errorf("part %+v: want a new id, the body's, its message count and no PublishID", p)
		}
		if p.Queue != "q" || p.Delay != time.Second || !p.Exclusive || p.Key != "k" || p.DedupWindow != time.Minute || d.Attempt != 2 || d.DedupMillis != 60000 {
			t.Errorf("part %+v (attempt %d): want the batch's queue, delay, Exclusive, key, dedup window and attempt", p, d.Attempt)
		}
		if !slices.Equal(p.MessageIDs, d.MessageIDs) || !slices.Equal(p.DedupIDs, d.MessageIDs) {
			t.Errorf("part MessageIDs %v, DedupIDs %v; want its messages' %v", p.MessageIDs, p.DedupIDs, d.MessageIDs)
		}
		ids = append(ids, d.MessageIDs...)
	}
	if !slices.Equal(ids, e.MessageIDs) {
		t.Fatalf("message ids %v, want %v", ids, e.MessageIDs)
	}
	one := &inner.Envelope{Version: inner.Version, ID: "b", Queue: "q", Created: time.Now(), MessageIDs: []string{"m"}, Messages: e.Messages[:1]}
	if _, err := envelope.Split(core.OutgoingBatch{ID: "b", Queue: "q", Body: inner.Encode(one)}); !errors.Is(err, core.ErrInvalidPayload) || !errors.Is(err, core.ErrRejected) {
		t.Fatalf("one message: %v; want ErrRejected and ErrInvalidPayload", err)
	}
	if _, err := envelope.Split(core.OutgoingBatch{ID: "b", Queue: "q", Body: []byte("not json")}); err == nil {
		t.Fatal("a body that is not an envelope was split")
	}
}
