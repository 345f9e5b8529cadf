package envelope

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestHeadersRoundTrip: headers survive Encode and both decoders, per message; a batch
// without headers has no "h" at all (its body as before headers existed); a re-encoded
// attempt, KeepMessages and Split keep each message's headers with it.
func TestHeadersRoundTrip(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		headers []map[string]string
		want    []map[string]string // as decoded
	}{
		{"none", nil, nil},
		{"all empty", []map[string]string{nil, {}}, nil},
		{"first only", []map[string]string{{"tenant": "a"}, nil}, []map[string]string{{"tenant": "a"}, {}}},
		{"each its own", []map[string]string{{"k": "1"}, {"k": "2", "enc": "x\"<>\\"}}, []map[string]string{{"k": "1"}, {"k": "2", "enc": "x\"<>\\"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &Envelope{Version: Version, ID: "b", Queue: "q", Created: created, Headers: tc.headers,
				MessageIDs: []string{"x", "y"}, Messages: []json.RawMessage{[]byte(`1`), []byte(`"two"`)}}
			body := Encode(e)
			if tc.want == nil && strings.Contains(string(body), `"h":`) {
				t.Fatalf("a batch without headers has an h field: %s", body)
			}
			d, err := Decode(body)
			if err != nil {
				t.Fatalf("Decode(%s): %v", body, err)
			}
			if !reflect.DeepEqual(d.Headers, tc.want) {
				t.Fatalf("Decode headers = %v, want %v", d.Headers, tc.want)
			}
			fast, ok := decodeTypedFast[json.RawMessage](body)
			switch {
			case ok && !reflect.DeepEqual(fast.Headers, tc.want):
				t.Fatalf("fast path headers = %v, want %v", fast.Headers, tc.want)
			case !ok && !strings.Contains(string(body), `\`): // escapes are left to encoding/json
				t.Fatalf("the fast path refused %s", body)
			}
			typed, err := DecodeTyped[json.RawMessage](body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(typed.Headers, tc.want) {
				t.Fatalf("DecodeTyped headers = %v, want %v", typed.Headers, tc.want)
			}
			again, err := ReencodeAttempt(body, 3)
			if err != nil {
				t.Fatal(err)
			}
			if d2, _ := Decode(again); !reflect.DeepEqual(d2.Headers, tc.want) {
				t.Fatalf("after ReencodeAttempt headers = %v, want %v", d2.Headers, tc.want)
			}
			parts, err := Split(body)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range parts {
				pd, _ := Decode(p)
				if got, want := pd.MessageHeaders(0), headersAt(tc.want, i); !reflect.DeepEqual(got, want) {
					t.Fatalf("half %d: headers %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestHeadersOldEnvelope: a body written before headers existed decodes with none.
func TestHeadersOldEnvelope(t *testing.T) {
	t.Parallel()
	body := []byte(`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`)
	d, err := Decode(body)
	if err != nil || d.Headers != nil {
		t.Fatalf("Decode = %v, %v; want no headers", d, err)
	}
	if string(Encode(d)) != string(body) {
		t.Fatalf("re-encoded %s, want %s", Encode(d), body)
	}
}

// TestHeadersCountChecked: a header list that is not one entry per message is undecodable.
func TestHeadersCountChecked(t *testing.T) {
	t.Parallel()
	body := []byte(`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":[{"a":"1"}],"ids":["x","y"],"m":[1,2]}`)
	if _, err := Decode(body); err == nil {
		t.Fatal("Decode accepted one header entry for two messages")
	}
	if _, err := DecodeTyped[int](body); err == nil {
		t.Fatal("DecodeTyped accepted one header entry for two messages")
	}
}
