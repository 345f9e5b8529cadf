package core

import (
	"errors"
	"fmt"
	"testing"
)

// TestUniqueOutcome: a commit and a stop of the batch itself are nil, a stop on another
// holder is a *UniqueError naming it (through wrapping too), any other error keeps its chain
// and names the key.
func TestUniqueOutcome(t *testing.T) {
	t.Parallel()
	u := Unique{Key: "k", Mode: UniqueUntilDone}
	if err := UniqueOutcome("q", u, nil); err != nil {
		t.Fatalf("committed: %v", err)
	}
	if err := UniqueOutcome("q", u, fmt.Errorf("tx: %w", &UniqueStop{Self: true})); err != nil {
		t.Fatalf("held by the batch itself: %v", err)
	}
	var ue *UniqueError
	err := UniqueOutcome("q", u, fmt.Errorf("tx: %w", &UniqueStop{Kept: "b1"}))
	if !errors.As(err, &ue) || ue.Queue != "q" || ue.Key != "k" || ue.Mode != UniqueUntilDone || ue.Kept != "b1" || !errors.Is(err, ErrUniqueHeld) {
		t.Fatalf("held by another batch: %v", err)
	}
	boom := errors.New("boom")
	if err := UniqueOutcome("q", u, boom); !errors.Is(err, boom) || errors.As(err, &ue) || err.Error() != `unique key "k" (`+UniqueUntilDone.String()+`): boom` {
		t.Fatalf("other error: %v", err)
	}
}
