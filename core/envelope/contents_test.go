package envelope_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/envelope"
	"github.com/txmq/txmq/parity"
)

func TestMessagesAndForReplay(t *testing.T) {
	t.Parallel()
	b := parity.EncodeBatch("contents-q", []string{"m1", "m2"}, json.RawMessage(`{"a":1}`), json.RawMessage(`"two"`))
	ids, msgs, err := envelope.Messages(b.Body)
	if err != nil || len(ids) != 2 || ids[0] != "m1" || ids[1] != "m2" || string(msgs[0]) != `{"a":1}` || string(msgs[1]) != `"two"` {
		t.Fatalf("Messages = %v %q %v", ids, msgs, err)
	}
	replay, err := envelope.ForReplay(b.Body)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := envelope.ForReplay(replay)
	if err != nil || !strings.Contains(string(replay), `"rp":1`) || !strings.Contains(string(twice), `"rp":2`) {
		t.Fatalf("ForReplay gives generations %q then %q (%v); want rp 1 then 2", replay, twice, err)
	}
	ids2, msgs2, err := envelope.Messages(replay)
	if err != nil || len(ids2) != 2 || ids2[1] != "m2" || string(msgs2[1]) != `"two"` {
		t.Fatalf("Messages(ForReplay) = %v %q %v", ids2, msgs2, err)
	}
	for _, bad := range [][]byte{nil, []byte(`{}`), []byte(`not json`)} {
		if _, _, err := envelope.Messages(bad); !errors.Is(err, core.ErrUndecodable) {
			t.Errorf("Messages(%q) error = %v; want core.ErrUndecodable", bad, err)
		}
		if _, err := envelope.ForReplay(bad); err == nil {
			t.Errorf("ForReplay(%q) = nil error", bad)
		}
	}
}
