package dedup

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// TestCheckSpec: a queue without IDDedupWindow always passes; one with a window needs a
// backend that deduplicates ids, for at least that long, and the refusal names the queue.
func TestCheckSpec(t *testing.T) {
	t.Parallel()
	cannot := errors.New("no ids here")
	for _, tc := range []struct {
		name    string
		d       IDs
		window  time.Duration
		wantErr bool
	}{
		{"no window, no support", IDs{err: cannot}, 0, false},
		{"window, no support", IDs{err: cannot}, time.Minute, true},
		{"window, any length", IDs{}, 24 * time.Hour, false},
		{"window within the backend's", IDs{support: core.DedupSupport{MaxWindow: 5 * time.Minute}}, 5 * time.Minute, false},
		{"window past the backend's", IDs{support: core.DedupSupport{MaxWindow: 5 * time.Minute}}, 6 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.d.CheckSpec(&engine.Spec{Name: "orders", IDWindow: tc.window})
			if (err != nil) != tc.wantErr {
				t.Fatalf("CheckSpec: %v; want an error: %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, cannot) && !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("CheckSpec: %v; want the backend's reason or ErrInvalidConfig", err)
			}
			if err != nil && !strings.Contains(err.Error(), `"orders"`) {
				t.Fatalf("CheckSpec: %v; want the queue named", err)
			}
		})
	}
	if err := (&IDs{err: cannot}).CheckSpec(nil); err != nil {
		t.Fatalf("CheckSpec(nil): %v; want nil", err)
	}
}
