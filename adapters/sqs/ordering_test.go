package sqs

import (
	"testing"
	"time"
)

// TestKeyedDelay checks how a keyed batch's delay is judged at each receive: the early
// receives (hides of at most MaxVisibility) are not runs, and what is left shrinks by one
// hide per receive.
func TestKeyedDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rem       time.Duration
		count     int
		wantEarly int
		wantLeft  time.Duration
	}{
		{"no delay", 0, 1, 0, 0},
		{"no delay, redelivered", 0, 3, 0, 0},
		{"short delay, first receive early", 2 * time.Second, 1, 1, 2 * time.Second},
		{"short delay, after the hide", 2 * time.Second, 2, 1, 0},
		{"short delay, lost lease after", 2 * time.Second, 3, 1, 0},
		{"long delay, first receive", MaxVisibility + time.Minute, 1, 2, MaxVisibility + time.Minute},
		{"long delay, after one hide", MaxVisibility + time.Minute, 2, 2, time.Minute},
		{"long delay, due", MaxVisibility + time.Minute, 3, 2, 0},
		{"exactly the cap", MaxVisibility, 2, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			early, left := keyedDelay(tt.rem, tt.count)
			if early != tt.wantEarly || left != tt.wantLeft {
				t.Fatalf("keyedDelay(%v, %d) = %d, %v; want %d, %v", tt.rem, tt.count, early, left, tt.wantEarly, tt.wantLeft)
			}
		})
	}
}
