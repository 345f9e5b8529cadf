// Package heartbeat is the nodes' heartbeat: an engine.Looper that writes the node's row
// (its id, the queues it listens to with their slots in use and caps, the txmq version, when
// it started) to a core.HeartbeatStore (the outbox's Nodes table) at Start and every Every,
// and a last row marked stopped as the node closes. The dashboard's nodes page reads them.
package heartbeat

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// DefaultEvery is how often a node writes its heartbeat by default.
const DefaultEvery = 5 * time.Second

// lastWrite bounds the last beat (the row marked stopped), which Close waits for: an
// unreachable database delays Close by at most this.
const lastWrite = 2 * time.Second

// module is the txmq module path, whose version a heartbeat carries.
const module = "github.com/txmq/txmq"

// Beat is the heartbeat feature.
type Beat struct {
	store core.HeartbeatStore
	every time.Duration
	e     *engine.Engine
}

// New returns the heartbeat writing to store every every (default DefaultEvery).
func New(store core.HeartbeatStore, every time.Duration) *Beat {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Beat{store: store, every: every}
}

// Attach implements engine.Attacher.
func (b *Beat) Attach(e *engine.Engine) { b.e = e }

// Loop writes the node's heartbeat at once and then every Every until ctx ends, then a last
// one marked stopped (engine.Looper; Close waits for it), unless the node was halted (a
// simulated crash: its row goes stale, as a killed process's does). A failed write is logged and the
// next one tried on time.
func (b *Beat) Loop(ctx context.Context) {
	started := b.e.Clock().Now()
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		b.write(ctx, started, false)
		select {
		case <-ctx.Done():
			if b.e.Halted() {
				return // a crash writes nothing more: the row goes stale, as a dead process's
			}
			// The last row: on a context of its own, since ctx is done.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(b.every, lastWrite))
			defer cancel()
			b.write(last, started, true)
			return
		case <-t.C:
		}
	}
}

func (b *Beat) write(ctx context.Context, started time.Time, stopped bool) {
	wctx, cancel := context.WithTimeout(ctx, b.every)
	defer cancel()
	nb := core.NodeBeat{Node: b.e.ID(), Queues: b.e.Slots(), Version: Version(), StartedAt: started,
		Every: b.every, Stopped: stopped}
	for i := range nb.Queues {
		nb.Queues[i].Minutes = minutes(b.e.RunHistory(nb.Queues[i].Queue))
	}
	if err := b.store.Beat(wctx, nb); err != nil && (stopped || ctx.Err() == nil) {
		b.e.Logger().Warn("txmq: writing the node's heartbeat failed", "node", nb.Node, "stopped", stopped, "error", err)
	}
}

// Version returns the txmq module version of this binary, from its build info: the
// dependency's version, "(devel)" when txmq is the main module, "" when unknown.
var Version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if info.Main.Path == module {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
})

// minutes turns a queue's run history into the heartbeat's form: the minutes that saw a run.
func minutes(h []engine.MinuteRuns) []core.NodeMinute {
	var out []core.NodeMinute
	for _, m := range h {
		if m.Batches > 0 {
			out = append(out, core.NodeMinute{Minute: m.Minute.Unix(), Batches: m.Batches, Messages: m.Messages, Failed: m.Failed})
		}
	}
	return out
}
