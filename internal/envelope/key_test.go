package envelope

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestKeyRoundTrip: the ordering key survives Encode, Decode, DecodeTyped (fast and JSON
// paths) and ReencodeAttempt; a batch without one encodes no "k".
func TestKeyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "acct-42", `we"ird\key`} {
		e := &Envelope{Version: Version, ID: "b1", Queue: "q", Created: time.Now().UTC(), Key: key,
			MessageIDs: []string{"m1"}, Messages: []json.RawMessage{[]byte(`1`)}}
		body := Encode(e)
		if key == "" && bytes.Contains(body, []byte(`"k"`)) {
			t.Fatalf("unkeyed batch encodes a key: %s", body)
		}
		d, err := Decode(body)
		if err != nil || d.Key != key {
			t.Fatalf("Decode(%s): key %q, %v; want %q", body, d.Key, err, key)
		}
		fast, err := DecodeTyped[int](body)
		if err != nil || fast.Key != key {
			t.Fatalf("DecodeTyped: key %q, %v; want %q", fast.Key, err, key)
		}
		slow, err := DecodeTypedJSON[int](body)
		if err != nil || slow.Key != key {
			t.Fatalf("DecodeTypedJSON: key %q, %v; want %q", slow.Key, err, key)
		}
		again, err := ReencodeAttempt(body, 3)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := Decode(again); err != nil || d.Key != key || d.Attempt != 3 {
			t.Fatalf("after ReencodeAttempt: %+v, %v", d, err)
		}
	}
}
