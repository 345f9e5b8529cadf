package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
)

// defaultCloseLogEvery is how often Close repeats what it still waits for.
const defaultCloseLogEvery = 5 * time.Second

// closeReport is what Close tells the log: what it waits for when it begins, again every
// Options.CloseLogEvery while it waits, and what it did when it ends. An operator who sends
// SIGTERM sees at once why the process has not exited yet, and afterwards which runs were cut
// short (released for another run) and which buffered messages went to the outbox.
type closeReport struct {
	n     *Engine
	start time.Time
	// The counters when Close began, so that the end reports what this Close did.
	published, handedOff int64
	dropped              int64
	// cutShort is the number of batches whose listeners Close cancelled (its ctx ended first).
	cutShort int
	// quiet stops the reminders (end closes it).
	quiet chan struct{}
	// waits: Close began with running batches or buffered messages (its lines are then at
	// info level, else at debug level).
	waits bool
}

// beginCloseReport logs what Close is about to wait for (the running batches per queue and
// the buffered messages it flushes) and starts the reminders.
func (n *Engine) beginCloseReport() *closeReport {
	r := &closeReport{n: n, start: time.Now(), quiet: make(chan struct{}),
		published: n.stats.publishedMessages.Load(), handedOff: n.stats.handedOff.Load(), dropped: n.stats.droppedTotal()}
	running, total := n.drv.runningByQueue()
	buffered := n.pub.buffered()
	// A Close with nothing to wait for says so at debug level only.
	r.waits = total > 0 || buffered > 0
	lvl := slog.LevelDebug
	if r.waits {
		lvl = slog.LevelInfo
	}
	n.log.Log(context.Background(), lvl, "txmq: closing: waiting for running batches and flushing the publish buffer",
		"running_batches", total, "queues", running, "buffered_messages", buffered,
		"flush_timeout", n.opts.CloseFlushTimeout)
	go r.remind()
	return r
}

// remind logs, every CloseLogEvery until end, what Close still waits for.
func (r *closeReport) remind() {
	t := time.NewTicker(r.n.opts.CloseLogEvery)
	defer t.Stop()
	for {
		select {
		case <-r.quiet:
			return
		case <-t.C:
			running, total := r.n.drv.runningByQueue()
			r.n.log.Info("txmq: still closing: waiting for running batches and the final flush (Close's ctx bounds the wait for listeners; a listener that ignores its ctx delays it)",
				"running_batches", total, "queues", running, "buffered_messages", r.n.pub.buffered(),
				"waited", time.Since(r.start).Round(time.Millisecond))
		}
	}
}

// end logs what Close did: runs cut short and released for another run, messages published
// and handed to the outbox by the final flushes, batches dropped.
func (r *closeReport) end(err error) {
	close(r.quiet)
	n := r.n
	handed, dropped := n.stats.handedOff.Load()-r.handedOff, n.stats.droppedTotal()-r.dropped
	attrs := []any{"took", time.Since(r.start).Round(time.Millisecond),
		"runs_cut_short", r.cutShort,
		"messages_published", n.stats.publishedMessages.Load() - r.published,
		"batches_handed_to_outbox", handed,
		"batches_dropped", dropped}
	switch {
	case err != nil:
		n.log.Warn("txmq: closed; runs cut short were released for another run that does not count against their budget", append(attrs, "error", err)...)
	case r.waits || handed > 0 || dropped > 0:
		n.log.Info("txmq: closed", attrs...)
	default:
		n.log.Debug("txmq: closed", attrs...)
	}
}

// waitRunning waits for the runner's admitted batches; when ctx ends first it cancels the running listeners (counted as cut short) and still
// waits for them to return. The error says that listeners were released.
func (r *closeReport) waitRunning(ctx context.Context) error {
	n := r.n
	done := make(chan struct{})
	go func() { n.run.wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// A ctx already done is no error when no listener runs (workers may still be settling,
	// each bounded by ClaimTimeout).
	var err error
	if _, total := n.drv.runningByQueue(); total > 0 {
		r.cutShort = total
		err = fmt.Errorf("txmq: node %s: listeners still running at close, released for another run: %w", n.id, ctx.Err())
		n.run.cancelRunning()
	}
	<-done
	return err
}

// runningByQueue returns the batches holding a slot, as "queue=N" sorted by queue, and their
// total.
func (dr *driver) runningByQueue() (string, int) {
	dr.mu.Lock()
	parts := make([]string, 0, len(dr.inflight))
	total := 0
	for q, v := range dr.inflight {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", q, v))
			total += v
		}
	}
	dr.mu.Unlock()
	sort.Strings(parts)
	return strings.Join(parts, ","), total
}
