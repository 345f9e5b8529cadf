package envelope

import (
	"encoding/json"
	"testing"
	"time"
)

// TestFairKeyOf: the fairness key of a batch comes back from its encoding, through the header
// scan and through a full decode when the header is not as Encode writes it, and the fast
// typed decode agrees with encoding/json on it.
func TestFairKeyOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name string
		e    Envelope
	}{
		{"none", Envelope{}},
		{"fair key", Envelope{FairKey: "tenant-1"}},
		{"with due, dedup, key and priority", Envelope{Due: at, DedupMillis: 5, Key: "k-1", Priority: 9, LeadMicros: 900, FairKey: "t2"}},
		{"not plain ASCII", Envelope{Key: "k\u00e9", FairKey: "t\u00e9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := tt.e
			e.Version, e.ID, e.Queue, e.Created = Version, "b1", "q", at
			e.MessageIDs, e.Messages = []string{"m1"}, []json.RawMessage{json.RawMessage(`{"x":1}`)}
			body := Encode(&e)
			if k := FairKeyOf(body); k != tt.e.FairKey {
				t.Fatalf("FairKeyOf(%s) = %q; want %q", body, k, tt.e.FairKey)
			}
			spaced := append([]byte(`{ `), body[1:]...) // not as Encode writes it: decoded
			if k := FairKeyOf(spaced); k != tt.e.FairKey {
				t.Fatalf("FairKeyOf(spaced) = %q; want %q", k, tt.e.FairKey)
			}
			if p, _ := PriorityOf(body); p != tt.e.Priority {
				t.Fatalf("PriorityOf with a fairness key = %d; want %d", p, tt.e.Priority)
			}
			fast, err := DecodeTyped[map[string]int](body)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := DecodeTypedJSON[map[string]int](body)
			if err != nil {
				t.Fatal(err)
			}
			if fast.FairKey != slow.FairKey || fast.FairKey != tt.e.FairKey {
				t.Fatalf("fast decode %q, encoding/json %q, want %q", fast.FairKey, slow.FairKey, tt.e.FairKey)
			}
		})
	}
	if k := FairKeyOf([]byte("not json")); k != "" {
		t.Fatalf("FairKeyOf(garbage) = %q; want empty", k)
	}
}
