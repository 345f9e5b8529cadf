package envelope

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestSplitEnvelope(t *testing.T) {
	t.Parallel()
	e := &Envelope{ID: core.NewID(), Queue: "q", Attempt: 2, Created: time.Now(), Trace: map[string]string{"traceparent": "x"}}
	for i := range 5 {
		e.MessageIDs = append(e.MessageIDs, fmt.Sprint("m", i))
		e.Messages = append(e.Messages, []byte(fmt.Sprint(i)))
	}
	parts, err := Split(Encode(e))
	if err != nil || len(parts) != 2 {
		t.Fatalf("split: %d parts, %v", len(parts), err)
	}
	var ids []string
	seen := map[string]bool{}
	for _, p := range parts {
		d, err := Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Attempt != 2 || d.Queue != "q" || d.Trace["traceparent"] != "x" || d.ID == e.ID || seen[d.ID] {
			t.Fatalf("part header %+v", d)
		}
		seen[d.ID] = true
		ids = append(ids, d.MessageIDs...)
	}
	if fmt.Sprint(ids) != fmt.Sprint(e.MessageIDs) {
		t.Fatalf("message ids %v, want %v", ids, e.MessageIDs)
	}
	one := &Envelope{ID: "b", Queue: "q", MessageIDs: []string{"m"}, Messages: e.Messages[:1]}
	if _, err := Split(Encode(one)); !errors.Is(err, core.ErrInvalidPayload) || !errors.Is(err, core.ErrRejected) {
		t.Fatalf("one message: %v", err)
	}
}
