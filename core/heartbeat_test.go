package core

import (
	"testing"
	"time"
)

func TestNodeBeatState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		b    NodeBeat
		want string
	}{
		{"just seen", NodeBeat{LastSeen: now, Every: 5 * time.Second}, NodeRunning},
		{"three beats missed exactly", NodeBeat{LastSeen: now.Add(-15 * time.Second), Every: 5 * time.Second}, NodeRunning},
		{"more than three missed", NodeBeat{LastSeen: now.Add(-16 * time.Second), Every: 5 * time.Second}, NodeStale},
		{"stopped, however old", NodeBeat{LastSeen: now.Add(-time.Hour), Every: 5 * time.Second, Stopped: true}, NodeStopped},
		{"no interval known", NodeBeat{LastSeen: now.Add(-time.Hour)}, NodeRunning},
	} {
		if got := tc.b.State(now); got != tc.want {
			t.Errorf("%s: State = %q, want %q", tc.name, got, tc.want)
		}
	}
}
