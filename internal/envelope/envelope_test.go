package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

func TestIDCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{`[]`, 0, false},
		{`null`, 0, false},
		{`["a"]`, 1, false},
		{` [ "a" , "b" ] `, 2, false},
		{`["a,b","c"]`, 2, false},
		{`["a\"b","c"]`, 2, false},
		{`["a\\","b"]`, 2, false},
		{`["a\\\"]", "[", "]"]`, 3, false},
		{"[\n\t\"x\"\r\n]", 1, false},
		{`[1]`, 0, true},
		{`["a",null]`, 0, true},
		{`[["a"]]`, 0, true},
		{`{}`, 0, true},
		{`"a"`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var v struct {
				IDs IDList `json:"ids"`
			}
			err := json.Unmarshal([]byte(`{"ids":`+tt.in+`}`), &v)
			if (err != nil) != tt.wantErr || (err == nil && v.IDs.Len() != tt.want) {
				t.Fatalf("got %d, %v; want %d, error %v", v.IDs.Len(), err, tt.want, tt.wantErr)
			}
			var strs []string
			if err == nil && json.Unmarshal([]byte(tt.in), &strs) == nil && (len(strs) != v.IDs.Len() || fmt.Sprint(v.IDs.IDs()) != fmt.Sprint(strs) && len(strs) > 0) {
				t.Fatalf("counted %d (%q), encoding/json decodes %q", v.IDs.Len(), v.IDs.IDs(), strs)
			}
		})
	}
}

// TestIDListIDs: the ids decode as encoding/json decodes them, with or without escapes,
// whitespace and characters beyond ASCII.
func TestIDListIDs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`["a","b","c"]`,
		`[ "a" , "" ,"0123456789abcdefghjkmnpqrs" ]`,
		`["ü-1","日本"]`,
		`["a\"b","c\\d","\u00e9"]`,
		`["x"]`,
		"[\"a\xffb\"]",
	} {
		var l IDList
		if err := l.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want []string
		_ = json.Unmarshal([]byte(raw), &want)
		if got := l.IDs(); !slices.Equal(got, want) || l.Len() != len(want) {
			t.Errorf("%s: IDs() = %q (Len %d); want %q", raw, got, l.Len(), want)
		}
	}
}

// TestReplayGeneration: a replay's generation survives Encode, Decode and the typed decoders
// (the fast one hands a replayed batch to encoding/json), and EncodeReplay resets the
// attempt count while keeping the rest.
func TestReplayGeneration(t *testing.T) {
	t.Parallel()
	orig := Encode(&Envelope{ID: "b-replay", Queue: "q-replay", Attempt: 4, MessageIDs: []string{"m"}, Messages: []json.RawMessage{json.RawMessage(`{"k":1}`)}})
	decoded, err := Decode(orig)
	if err != nil {
		t.Fatal(err)
	}
	for gen := 1; gen <= 3; gen++ {
		body := EncodeReplay(decoded, gen)
		e, err := Decode(body)
		if err != nil || e.Replays != gen || e.Attempt != 0 || e.ID != "b-replay" || len(e.Messages) != 1 {
			t.Fatalf("Decode(EncodeReplay(%d)) = %+v, %v; want generation %d, attempt 0, the batch kept", gen, e, err, gen)
		}
		typed, err := DecodeTyped[map[string]int](body)
		if err != nil || typed.Replays != gen || typed.Messages[0]["k"] != 1 {
			t.Fatalf("DecodeTyped(EncodeReplay(%d)) = %+v, %v", gen, typed, err)
		}
		again, err := ReencodeAttempt(body, 2) // a retry of the replay keeps its generation
		if e2, _ := Decode(again); err != nil || e2 == nil || e2.Replays != gen || e2.Attempt != 2 {
			t.Fatalf("ReencodeAttempt of a replay lost its generation: %+v, %v", e2, err)
		}
	}
	if e, _ := Decode(orig); e.Replays != 0 {
		t.Fatalf("a batch never replayed has generation %d", e.Replays)
	}
}
