package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

func init() {
	register(&command{name: "demo", summary: "run a small app on the embedded memory backend (no server needed)", run: runDemo})
}

// Signup and Report are the demo's message types.
type Signup struct {
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// Report is a message for the demo's exclusive queue.
type Report struct {
	Name string `json:"name"`
}

// demoSink keeps dead letters in memory for the demo.
type demoSink struct {
	mu  sync.Mutex
	got []*core.DeadLetter
}

func (s *demoSink) DeadLetter(_ context.Context, dl *core.DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, dl)
	return nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "demo [-n messages] [-v]", stderr)
	count := fs.Int("n", 2000, "messages to publish in the burst")
	verbose := fs.Bool("v", false, "print the engine's logs")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *count < 1 {
		return &usageError{msg: "-n must be at least 1"}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// Listeners and OnError run on the node's goroutines: serialise what they all print.
	stdout = &lockedWriter{w: stdout}

	logLevel := slog.LevelError + 1
	if *verbose {
		logLevel = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel}))

	// 1. Declare queues: once, with a validated config.
	reg := core.NewRegistry()
	var onErrorCalls atomic.Int32
	signups := core.MustDeclare(reg, "signups", core.QueueConfig[Signup]{
		Transactional:        core.Try,
		MaxConcurrentBatches: core.Cap(4),
		MaxAttempts:          3,
		OnError: func(msgs []Signup, err error, attempts int) error {
			onErrorCalls.Add(1)
			fmt.Fprintf(stdout, "  OnError: %d message(s) gave up after %d runs: %v\n", len(msgs), attempts, err)
			return nil
		},
	})
	reports := core.MustDeclare(reg, "reports", core.QueueConfig[Report]{Transactional: core.Never, Exclusive: true})

	// 2. A node on the embedded backend.
	backend := memory.New(nil)
	defer backend.Close()
	sink := &demoSink{}
	node, err := core.NewNode(&core.NodeOptions{
		Backend: backend, Registry: reg, Logger: logger, DeadLetters: sink,
		Backoff: core.ExponentialBackoff(50*time.Millisecond, time.Second),
	})
	if err != nil {
		return err
	}

	// 3. One listener per queue.
	var delivered, failedRuns, reportsDone atomic.Int64
	if err := signups.Listen(node, func(ctx context.Context, msgs []Signup) error {
		for _, m := range msgs {
			if m.Plan == "poison" {
				failedRuns.Add(1)
				return fmt.Errorf("cannot provision plan %q for %s", m.Plan, m.Email)
			}
		}
		delivered.Add(int64(len(msgs)))
		return nil
	}); err != nil {
		return err
	}
	if err := reports.Listen(node, func(ctx context.Context, msgs []Report) error {
		reportsDone.Add(int64(len(msgs)))
		return nil
	}); err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}

	// 4. Publish a burst; one message is poison and will be dead-lettered.
	fmt.Fprintf(stdout, "txmq demo: publishing %d signups and 1 poison message on the memory backend\n", *count)
	start := time.Now()
	for i := range *count {
		if err := signups.Publish(ctx, node, Signup{Email: fmt.Sprintf("user%d@example.com", i), Plan: "free"}); err != nil {
			return err
		}
	}
	// A batch fails or succeeds as a whole; a short delay gives the poison message a batch of
	// its own, so the burst is not retried with it.
	if err := signups.Publish(ctx, node, Signup{Email: "mallory@example.com", Plan: "poison"}, core.After(10*time.Millisecond)); err != nil {
		return err
	}
	if err := reports.PublishMany(ctx, node, []Report{{Name: "daily"}, {Name: "weekly"}}, core.After(200*time.Millisecond)); err != nil {
		return err
	}

	// 5. Progress until everything settled.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		sink.mu.Lock()
		dead := len(sink.got)
		sink.mu.Unlock()
		if delivered.Load() >= int64(*count) && dead >= 1 && onErrorCalls.Load() >= 1 && reportsDone.Load() == 2 {
			break
		}
		select {
		case <-ctx.Done():
			_ = node.Close(context.Background())
			return fmt.Errorf("timed out: delivered %d/%d, dead letters %d, reports %d/2", delivered.Load(), *count, dead, reportsDone.Load())
		case <-tick.C:
			fmt.Fprintf(stdout, "  progress: delivered %d/%d, failed runs %d, dead letters %d\n", delivered.Load(), *count, failedRuns.Load(), dead)
		}
	}
	took := time.Since(start)
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	if err := node.Close(closeCtx); err != nil {
		return err
	}
	st := node.Stats()
	fmt.Fprintln(stdout, "summary:")
	fmt.Fprintf(stdout, "  delivered      %d messages in %d batches (%v)\n", delivered.Load(), st.Succeeded, took.Round(time.Millisecond))
	fmt.Fprintf(stdout, "  exclusive      %d delayed report(s) delivered\n", reportsDone.Load())
	fmt.Fprintf(stdout, "  failed runs    %d (poison batch, budget 3), retries %d\n", failedRuns.Load(), st.Retried)
	fmt.Fprintf(stdout, "  dropped        %v\n", st.Dropped)
	for _, dl := range sink.got {
		fmt.Fprintf(stdout, "  dead letter    queue=%s batch=%s reason=%s attempts=%d error=%q\n", dl.Queue, dl.BatchID, dl.Reason, dl.Attempts, dl.Error)
	}
	if onErrorCalls.Load() != 1 || st.Dropped[core.ReasonDeliveryExhausted] != 1 {
		return errors.New("unexpected: the poison batch was not dropped exactly once")
	}
	return nil
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
