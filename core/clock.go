package core

import "time"

// Clock tells time for the publish buffer and the engine; tests inject a fake one to drive the
// buffer's window and cap without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
