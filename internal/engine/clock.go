package engine

import (
	"context"
	"time"
)

// Clock tells time for the publish buffer and the schedules (txmq.Clock).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// MaxClockSkew is txmq.MaxClockSkew: the largest clock difference the early-arrival guard
// allows for.
const MaxClockSkew = time.Minute

// PauseSource tells which queues are paused cluster-wide (txmq.PauseSource; the pause
// feature reads it).
type PauseSource interface {
	// Paused returns the names of the paused queues.
	Paused(ctx context.Context) ([]string, error)
}
