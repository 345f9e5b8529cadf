package txmq

import (
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

func TestSetIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		msgs    int
		ids     []string
		wantErr string // substring; empty means success
	}{
		{"one each", 2, []string{"a", "order-42/é"}, ""},
		{"too few", 2, []string{"a"}, "1 ids for 2 messages"},
		{"too many", 1, []string{"a", "b"}, "2 ids for 1 messages"},
		{"empty", 1, []string{""}, "is empty"},
		{"too long", 1, []string{strings.Repeat("x", MaxIDBytes+1)}, "use at most 255"},
		{"longest", 1, []string{strings.Repeat("x", MaxIDBytes)}, ""},
		{"control", 1, []string{"a\nb"}, "control character"},
		{"bad utf-8", 1, []string{"a\xffb"}, "not valid UTF-8"},
		{"twice", 2, []string{"a", "a"}, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msgs := make([]core.Message, tt.msgs)
			err := setIDs("orders", msgs, tt.ids)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("setIDs: %v", err)
				}
				for i, m := range msgs {
					if m.ID != tt.ids[i] {
						t.Fatalf("message %d has id %q, want %q", i, m.ID, tt.ids[i])
					}
				}
				return
			}
			if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `"orders"`) {
				t.Fatalf("setIDs = %v; want ErrInvalidConfig naming the queue and %q", err, tt.wantErr)
			}
		})
	}
}
