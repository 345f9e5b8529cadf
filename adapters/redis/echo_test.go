package redis

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// A local wake serves its publish's wake-up in advance: that message, back within echoTTL,
// wakes no one, and any other wakes as before. A local wake whose script sent no wake-up,
// that woke no fetch, or came while the channel was not confirmed, expects nothing back.
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
		name      string
		published bool          // the publish script sent a wake-up
		waiting   bool          // a fetch waits on the channel at the local wake
		live      bool          // the channel is confirmed subscribed
		age       time.Duration // how long ago the local wake was, when the messages come
		want      [3]bool       // whether each of three messages that follow wakes the fetch
	}{
		{"echo swallowed once", true, true, true, 0, [3]bool{false, true, true}},
		{"echo too late", true, true, true, 2 * echoTTL, [3]bool{true, true, true}},
		{"no wake-up sent", false, true, true, 0, [3]bool{true, true, true}},
		{"no fetch woken", true, false, true, 0, [3]bool{true, true, true}},
		{"channel not confirmed", true, true, false, 0, [3]bool{true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWaker(nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			defer w.stop()
			const ch = "{txmq:q}:wake"
			w.live[ch] = tt.live
			var wt *waiter
			if tt.waiting {
				wt = w.register([]string{ch})
			}
			w.quiet[ch] = rest{until: time.Now().Add(time.Hour)}
			w.wakeLocal(ch, tt.published)
			if tt.waiting && !woken(wt) {
				t.Fatal("the local wake did not wake the waiting fetch")
			}
			if _, resting := w.quiet[ch]; resting {
				t.Fatal("the local wake left the queue resting")
			}
			if wt == nil {
				wt = w.register([]string{ch})
			}
			if tt.age > 0 {
				e := w.echoes[ch]
				e.at = e.at.Add(-tt.age)
				w.echoes[ch] = e
			}
			for i, want := range tt.want {
				if !w.echoed(ch) {
					w.wakeChannel(ch)
				}
				if got := woken(wt); got != want {
					t.Fatalf("message %d woke the fetch: %v, want %v", i+1, got, want)
				}
			}
		})
	}
}
