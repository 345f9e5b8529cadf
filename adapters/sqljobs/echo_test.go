package sqljobs

import (
	"testing"
	"time"
)

// A local wake serves its publish's NOTIFY in advance: that NOTIFY, back within echoTTL,
// wakes no one, and any other wakes as before. A local wake that woke no fetch, or came while
// LISTEN was not in effect, expects nothing back.
func TestLocalWakeEchoes(t *testing.T) {
	t.Parallel()
	woken := func(w *waiter) bool {
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}
	tests := []struct {
		name    string
		waiting bool          // a fetch waits on the queue at the local wake
		up      bool          // LISTEN is in effect
		age     time.Duration // how long ago the local wake was, when the NOTIFYs come
		// whether each of three NOTIFYs that follow wakes the waiting fetch
		want [3]bool
	}{
		{"echo swallowed once", true, true, 0, [3]bool{false, true, true}},
		{"echo too late", true, true, 2 * echoTTL, [3]bool{true, true, true}},
		{"no fetch woken", false, true, 0, [3]bool{true, true, true}},
		{"listen not in effect", true, false, 0, [3]bool{true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newListener(&Backend{})
			l.started = true // no LISTEN goroutine in this test
			l.up.Store(tt.up)
			var w *waiter
			if tt.waiting {
				w = l.register([]string{"q"})
			}
			l.wakeLocal("q")
			if tt.waiting && !woken(w) {
				t.Fatal("the local wake did not wake the waiting fetch")
			}
			if w == nil {
				w = l.register([]string{"q"})
			}
			if tt.age > 0 {
				l.mu.Lock()
				e := l.echoes["q"]
				e.at = e.at.Add(-tt.age)
				l.echoes["q"] = e
				l.mu.Unlock()
			}
			for i, want := range tt.want {
				l.wake("q")
				if got := woken(w); got != want {
					t.Fatalf("NOTIFY %d woke the fetch: %v, want %v", i+1, got, want)
				}
			}
		})
	}
}
