package envelope

import (
	"encoding/json"
	"testing"
	"time"
)

// TestPriorityOf: the priority and lead of a batch come back from its encoding, through the
// header scan and through a full decode when the header is not as Encode writes it, and the
// fast typed decode agrees with encoding/json on them.
func TestPriorityOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name string
		e    Envelope
	}{
		{"none", Envelope{}},
		{"priority", Envelope{Priority: 7, LeadMicros: 7_000_000}},
		{"with due, dedup and key", Envelope{Due: at, DedupMillis: 5, Key: "k-1", Priority: 9, LeadMicros: 900}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := tt.e
			e.Version, e.ID, e.Queue, e.Created = Version, "b1", "q", at
			e.MessageIDs, e.Messages = []string{"m1"}, []json.RawMessage{json.RawMessage(`{"x":1}`)}
			body := Encode(&e)
			want := time.Duration(tt.e.LeadMicros) * time.Microsecond
			if p, lead := PriorityOf(body); p != tt.e.Priority || lead != want {
				t.Fatalf("PriorityOf(%s) = %d, %v; want %d, %v", body, p, lead, tt.e.Priority, want)
			}
			spaced := append([]byte(`{ `), body[1:]...) // not as Encode writes it: decoded
			if p, lead := PriorityOf(spaced); p != tt.e.Priority || lead != want {
				t.Fatalf("PriorityOf(spaced) = %d, %v; want %d, %v", p, lead, tt.e.Priority, want)
			}
			fast, err := DecodeTyped[map[string]int](body)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := DecodeTypedJSON[map[string]int](body)
			if err != nil {
				t.Fatal(err)
			}
			if fast.Priority != slow.Priority || fast.LeadMicros != slow.LeadMicros || fast.Priority != tt.e.Priority {
				t.Fatalf("fast decode %d/%d, encoding/json %d/%d, want %d", fast.Priority, fast.LeadMicros, slow.Priority, slow.LeadMicros, tt.e.Priority)
			}
		})
	}
	if p, lead := PriorityOf([]byte("not json")); p != 0 || lead != 0 {
		t.Fatalf("PriorityOf(garbage) = %d, %v; want 0, 0", p, lead)
	}
}
