package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// The internal tests' helpers; the external tests (package engine_test) drive the engine
// through the app API instead.

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// encodeMessages encodes msgs as the app API does at publish (each to JSON, with a new id).
func encodeMessages[T any](_ *Spec, msgs []T) ([]core.Message, error) {
	out := make([]core.Message, len(msgs))
	for i := range msgs {
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return nil, err
		}
		out[i] = core.Message{ID: core.NewID(), Body: b}
	}
	return out, nil
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
