package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"
)

func keyedPending(spec *engine.Spec, key, body string, due time.Time) *core.Pending {
	return engine.Pending(spec, &core.Pending{Queue: spec.Name, Key: key, NotBefore: due,
		Messages: []core.Message{{ID: body, Body: []byte(`"` + body + `"`)}}}, engine.PendingOpts{})
}

func bodies(t *testing.T, b core.OutgoingBatch) string {
	t.Helper()
	env, err := envelope.Decode(b.Body)
	if err != nil {
		t.Fatal(err)
	}
	if env.Key != b.Key {
		t.Fatalf("batch key %q, envelope key %q", b.Key, env.Key)
	}
	var s []string
	for _, m := range env.Messages {
		s = append(s, strings.Trim(string(m), `"`))
	}
	return b.Key + ":" + strings.Join(s, ",")
}
