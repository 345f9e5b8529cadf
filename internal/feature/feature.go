// Package feature plugs the optional features into an engine: it turns the app's options
// into the list engine.Options.Features takes, one registration per feature (pause, rate
// limit, schedules, tracing, the ledger's events, ledger mode, id dedup, the heartbeat; each a package of
// its own under this one). The app API (package txmq)
// calls List at NewNode and imports no feature package; the engine imports none either.
package feature

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/feature/dedup"
	"github.com/txmq/txmq/internal/feature/heartbeat"
	"github.com/txmq/txmq/internal/feature/ledgermode"
	"github.com/txmq/txmq/internal/feature/pause"
	"github.com/txmq/txmq/internal/feature/ratelimit"
	"github.com/txmq/txmq/internal/feature/record"
	"github.com/txmq/txmq/internal/feature/schedule"
	"github.com/txmq/txmq/internal/feature/trace"
	"github.com/txmq/txmq/internal/feature/unique"
)

// Schedule and Ticks are the schedules feature's (schedule.Schedule, schedule.Ticks), named
// here so that the app API builds them without importing the feature.
type (
	Schedule = schedule.Schedule
	Ticks    = schedule.Ticks
)

// ParseSchedule parses a schedule's spec (cron, a descriptor or "@every D") read in loc into
// the ticks the schedules feature claims: schedule.Parse, named here for the app API.
var ParseSchedule = schedule.Parse

// Config is what the features need from the app's options (txmq.NodeOptions).
type Config struct {
	// Pauses and PauseCheck: the pause feature (nil Pauses: no queue is ever paused).
	Pauses     engine.PauseSource
	PauseCheck time.Duration
	// Heartbeats: the node's heartbeat row (nil: none is written).
	Heartbeats core.HeartbeatStore
	// Limiter: the rate-limit feature's token source (nil: the backend's, or this node's).
	Limiter core.Limiter
	// Ticks and Schedules: the schedules feature (nil Ticks: schedules do not run here).
	Ticks     schedule.Claimer
	Schedules func() []Schedule
	// Ledger: the ledger's events (nil: none), and ledger mode when it is a
	// ledgermode.Keeper whose mode is on.
	Ledger core.MessageRecorder
	// Tracer, InjectTrace and ExtractTrace: the tracing feature (all nil: none).
	Tracer       trace.Tracer
	InjectTrace  func(ctx context.Context) map[string]string
	ExtractTrace func(ctx context.Context, trace map[string]string) context.Context
}

// List returns the features c asks for, for engine.Options.Features.
func List(c Config, backend core.Backend) []any {
	var fs []any
	if c.Pauses != nil {
		fs = append(fs, pause.New(c.Pauses, c.PauseCheck))
	}
	if c.Heartbeats != nil {
		fs = append(fs, heartbeat.New(c.Heartbeats, 0))
	}
	fs = append(fs, ratelimit.New(c.Limiter, backend), dedup.New(backend), unique.New(backend))
	if c.Schedules != nil {
		fs = append(fs, schedule.New(c.Ticks, c.Schedules))
	}
	if c.Ledger != nil {
		fs = append(fs, record.New(c.Ledger))
	}
	if k, ok := c.Ledger.(ledgermode.Keeper); ok {
		fs = append(fs, ledgermode.New(k))
	}
	if t := trace.New(c.Tracer, c.InjectTrace, c.ExtractTrace); t != nil {
		fs = append(fs, t)
	}
	return fs
}
