package parity_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/txmq/txmq/parity"
)

// TestEncodeDecodeBatch: what EncodeBatch encodes, DecodeBatch gives back, with new message
// ids when none are given.
func TestEncodeDecodeBatch(t *testing.T) {
	t.Parallel()
	msgs := []json.RawMessage{json.RawMessage(`"a"`), json.RawMessage(`{"k":1}`)}
	b := parity.EncodeBatch("q", []string{"m0", "m1"}, msgs...)
	if b.Queue != "q" || b.ID == "" || b.Messages != 2 {
		t.Fatalf("EncodeBatch = %+v", b)
	}
	ids, got, err := parity.DecodeBatch(b.Body)
	if err != nil || !slices.Equal(ids, []string{"m0", "m1"}) || len(got) != 2 || string(got[0]) != `"a"` || string(got[1]) != `{"k":1}` {
		t.Fatalf("DecodeBatch = %v, %q, %v", ids, got, err)
	}
	ids, _, err = parity.DecodeBatch(parity.EncodeBatch("q", nil, msgs...).Body)
	if err != nil || len(ids) != 2 || ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("new message ids %v, %v; want two distinct", ids, err)
	}
	if _, _, err := parity.DecodeBatch([]byte("not json")); err == nil {
		t.Fatal("DecodeBatch of a body that is not a batch succeeded")
	}
}
