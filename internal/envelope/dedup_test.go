package envelope

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestDedupOf(t *testing.T) {
	t.Parallel()
	base := func(ms int64, due time.Time) *Envelope {
		return &Envelope{ID: "b1", Queue: "q", Created: time.Unix(1, 0), Due: due, DedupMillis: ms, Key: "k",
			MessageIDs: []string{"a", "é"}, Messages: []json.RawMessage{[]byte(`1`), []byte(`{"x":"\"dw\":1"}`)}}
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		window time.Duration
		ids    []string
	}{
		{"none", Encode(base(0, time.Time{})), 0, nil},
		{"window", Encode(base(1500, time.Time{})), 1500 * time.Millisecond, []string{"a", "é"}},
		{"window and due", Encode(base(7, time.Unix(99, 5))), 7 * time.Millisecond, []string{"a", "é"}},
		{"json order", []byte(`{"ids":["a"],"m":[1],"dw":5,"v":1,"id":"b","q":"q","a":0,"t":"2020-01-01T00:00:00Z"}`), 5 * time.Millisecond, []string{"a"}},
		{"not an envelope", []byte(`{"v":1,"dw":`), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, ids := DedupOf(tc.body)
			if w != tc.window || !slices.Equal(ids, tc.ids) {
				t.Fatalf("DedupOf = %v, %q; want %v, %q", w, ids, tc.window, tc.ids)
			}
		})
	}
}

func TestDedupMillisFastPath(t *testing.T) {
	t.Parallel()
	body := Encode(&Envelope{ID: "b1", Queue: "q", Created: time.Unix(1, 0), DedupMillis: 250, MessageIDs: []string{"a"}, Messages: []json.RawMessage{[]byte(`3`)}})
	e, ok := decodeTypedFast[int](body)
	if !ok || e.DedupMillis != 250 || e.Messages[0] != 3 {
		t.Fatalf("fast decode: ok=%v %+v", ok, e)
	}
	d, err := Decode(body)
	if err != nil || d.DedupMillis != 250 {
		t.Fatalf("Decode: %v %+v", err, d)
	}
}
