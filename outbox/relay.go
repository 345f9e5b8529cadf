package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// Reconnect delays of the LISTEN connection.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Start runs the relay and the recovery sweep in this process until Close. The relay holds a
// dedicated connection (taken from the pool) that LISTENs on the store's channel and, on each
// NOTIFY from an app-managed transaction (WithTx, WithSQLTx), publishes the due rows; it
// reconnects on failure and catches up after each (re)connection. The sweep (SweepOnce) runs
// at once and then every Options.SweepInterval. Start returns after the first LISTEN succeeded,
// or its error; ctx bounds that first connection only and is not retained. The LISTEN
// connection is opened on Options.ListenURL when set; with Options.PgBouncer and no ListenURL
// there is none, and the relay looks for due rows every Options.PollInterval instead.
func (s *Store) Start(ctx context.Context) error {
	if s == nil {
		return errNoStore("Start")
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return fmt.Errorf("txmq outbox: Start after Close: %w", core.ErrClosed)
	case s.started:
		s.mu.Unlock()
		return fmt.Errorf("%w: txmq outbox: the store of schema %q is already started", core.ErrInvalidConfig, s.o.Schema)
	}
	s.started = true
	s.mu.Unlock()
	var conn *pgx.Conn
	polls := s.o.polls() || s.pg == nil // no LISTEN outside PostgreSQL
	if !polls {
		var err error
		if conn, err = s.listen(ctx); err != nil {
			s.mu.Lock()
			s.started = false
			s.mu.Unlock()
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.closed { // Close ran while we connected: it found nothing to stop
		s.mu.Unlock()
		cancel()
		if conn != nil {
			_ = conn.Close(context.Background())
		}
		return fmt.Errorf("txmq outbox: Start: the store was closed while starting: %w", core.ErrClosed)
	}
	s.cancel = cancel
	s.loops.Add(2) // under s.mu, so never concurrent with Close's Wait
	s.mu.Unlock()
	if polls {
		go s.pollLoop(runCtx)
	} else {
		go s.listenLoop(runCtx, conn)
	}
	go s.workLoop(runCtx)
	return nil
}

// Close stops the relay and the sweep and the after-commit publishers of RunInTx, waiting
// (until ctx is done) for the page being published to finish and for the rows already handed
// to the publishers; the rows not published by then stay in the outbox for the recovery sweep.
// It does not close the pool or the backend. The store stays usable for RunInTx (whose rows
// are then left to the sweep of a running store), WithTx, Handoff and dead letters; only
// Start is refused.
func (s *Store) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if err := s.closeAfterCommit(ctx); err != nil {
		return err
	}
	if idle := s.handoffIdle(); idle != nil { // handoffs waiting for a single-writer database
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("txmq outbox: Close: handed-off batches of schema %q are still waiting for the app database's writer: %w", s.o.Schema, ctx.Err())
		}
	}
	if idle := s.adhocIdle(); idle != nil { // RunInSQLTx's pass on a store not started
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("txmq outbox: Close: a relay pass of schema %q is still publishing; the rows not published yet stay in the outbox for the recovery sweep: %w", s.o.Schema, ctx.Err())
		}
	}
	if cancel == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { s.loops.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("txmq outbox: Close: the relay or sweep of schema %q is still finishing a page: %w", s.o.Schema, ctx.Err())
	}
}

// listen opens a dedicated connection (on Options.ListenURL when set, else taken from the
// pool) and LISTENs on the store's channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	var conn *pgx.Conn
	if s.listenCfg != nil {
		c, err := pgx.ConnectConfig(ctx, s.listenCfg.Copy())
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: connecting the relay's LISTEN connection to Options.ListenURL %s: %w", core.Redact(s.o.ListenURL), core.RedactError(err, s.o.ListenURL))
		}
		conn = c
	} else {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: connecting the relay's LISTEN connection: %w", err)
		}
		conn = pc.Hijack()
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("txmq outbox: LISTEN %s: %w", s.channel, err)
	}
	return conn, nil
}

// listenLoop wakes the work loop on every notification, reconnecting with backoff on error.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn) {
	defer s.loops.Done()
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	delay := listenRetryMin
	for {
		if conn == nil {
			var err error
			if conn, err = s.listen(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("txmq outbox: relay cannot LISTEN; retrying (the sweep still publishes)", "retry_in", delay, "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				delay = min(2*delay, listenRetryMax)
				continue
			}
			delay = listenRetryMin
			s.wake() // catch up on commits made while not listening
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("txmq outbox: relay LISTEN connection failed; reconnecting", "error", err)
			_ = conn.Close(context.Background())
			conn = nil
			continue
		}
		s.wake()
	}
}

// pollLoop wakes the work loop every Options.PollInterval: the relay without LISTEN.
func (s *Store) pollLoop(ctx context.Context) {
	defer s.loops.Done()
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.wake()
		}
	}
}

// wake asks the work loop for a relay run, without blocking; wakes coalesce.
func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// workLoop runs the relay on wake-ups and the sweep on the first tick and every interval. Both
// publish the same due rows; they run one at a time here.
func (s *Store) workLoop(ctx context.Context) {
	defer s.loops.Done()
	t := time.NewTicker(s.o.SweepInterval)
	defer t.Stop()
	s.runPass(ctx, viaSweep)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			s.runPass(ctx, viaRelay)
		case <-t.C:
			s.runPass(ctx, viaSweep)
		}
	}
}

func (s *Store) runPass(ctx context.Context, via string) {
	n, err := s.sweep(ctx, via)
	switch {
	case err == nil, errors.Is(err, context.Canceled) && ctx.Err() != nil:
	case errors.Is(err, core.ErrBackendUnavailable):
		s.log.Warn("txmq outbox: backend unavailable; stopped early", "via", via, "published", n, "error", err)
	default:
		s.log.Error("txmq outbox: publishing outbox rows failed", "via", via, "published", n, "error", err)
	}
	if n > 0 {
		s.log.Debug("txmq outbox: published outbox rows", "via", via, "rows", n)
	}
}
