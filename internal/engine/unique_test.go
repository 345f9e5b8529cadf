package engine

import (
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// TestBatchesUnique: on a unique queue each message with a key is a batch of its own carrying
// its key and the queue's mode (in the OutgoingBatch and the envelope), never joined by the
// plain publishes around it, which still share one batch; a unique key does not leak into them.
func TestBatchesUnique(t *testing.T) {
	t.Parallel()
	spec := &Spec{Name: "q", MaxBatch: 100, Unique: core.Unique{Mode: core.UniqueWindow, Window: 2 * time.Second}}
	m := &pendingMeta{spec: spec}
	plain := func(id string) *core.Pending {
		return &core.Pending{Queue: "q", Batcher: m, Messages: []core.Message{{ID: id, Body: []byte("1")}}}
	}
	unique := func(keys ...string) *core.Pending {
		p := &core.Pending{Queue: "q", Batcher: m}
		for _, k := range keys {
			p.Messages = append(p.Messages, core.Message{ID: "id-" + k, Body: []byte("2"), Unique: k})
		}
		return p
	}
	ps := []*core.Pending{plain("p1"), unique("a", "b"), plain("p2"), unique("a"), plain("p3")}
	bs, err := batches(ps, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	plainMsgs := 0
	for _, b := range bs {
		u := envelope.UniqueOf(b.Body)
		if u != b.Unique {
			t.Errorf("batch %s: envelope says %+v, OutgoingBatch %+v", b.ID, u, b.Unique)
		}
		if b.Unique.Mode == 0 {
			plainMsgs += b.Messages
			continue
		}
		if b.Messages != 1 || b.Unique.Mode != core.UniqueWindow || b.Unique.Window != 2*time.Second {
			t.Errorf("unique batch %+v: want one message, UniqueWindow 2s", b)
		}
		keys = append(keys, b.Unique.Key)
	}
	if len(keys) != 3 || keys[0] != "a" || keys[1] != "b" || keys[2] != "a" {
		t.Errorf("unique batches' keys %q, want a, b, a in publish order", keys)
	}
	if plainMsgs != 3 || len(bs) != 4 {
		t.Errorf("%d batches, %d plain messages; want the 3 plain messages in one batch beside 3 unique ones", len(bs), plainMsgs)
	}
	// One key's batches are written in one lane, in publish order (the last debounce wins).
	for _, lane := range orderLanes(bs) {
		if b := bs[lane[0]]; b.Unique.Key == "a" && (len(lane) != 2 || bs[lane[1]].Unique.Key != "a" || lane[0] > lane[1]) {
			t.Errorf("key a's lane %v: want both of its batches in publish order", lane)
		}
	}
	// A retry's rewrite keeps the key.
	for _, b := range bs {
		if b.Unique.Mode == 0 {
			continue
		}
		body, err := envelope.ReencodeAttempt(b.Body, 3)
		if err != nil {
			t.Fatal(err)
		}
		if u := envelope.UniqueOf(body); u != b.Unique {
			t.Errorf("rewritten batch: %+v, want %+v", u, b.Unique)
		}
	}
}
