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

// PauseSource tells which queues are paused cluster-wide (txmq.PauseSource).
type PauseSource interface {
	// Paused returns the names of the paused queues.
	Paused(ctx context.Context) ([]string, error)
}

// TickClaimer makes each tick of a schedule publish once cluster-wide (txmq.TickClaimer).
type TickClaimer interface {
	// ClaimTick runs publish and returns true if no node claimed tick of schedule before.
	ClaimTick(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error)
	// LastTick returns the latest claimed tick of schedule, zero if none.
	LastTick(ctx context.Context, schedule string) (time.Time, error)
}
