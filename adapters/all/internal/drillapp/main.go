package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/txmq/txmq/adapters/all" // every backend's URL scheme

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
)

// Drill is the queue's message.
type Drill struct {
	K string `json:"k"`
}

var queue = txmq.MustDeclare("drill", txmq.QueueConfig[Drill]{Transactional: txmq.Require, MaxBatchMessages: 20, MaxConcurrentBatches: txmq.Cap(4)})

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(log); err != nil {
		log.Error("drillapp failed", "error", err)
		os.Exit(1)
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drillapp: %s=%q: %v\n", name, v, err)
			os.Exit(2)
		}
		return d
	}
	return def
}

func run(log *slog.Logger) error {
	ctx := context.Background()
	cfg, err := txmq.ConfigFromEnv()
	if err != nil {
		return err
	}
	cfg.Logger = log
	cfg.Node.Lease = envDuration("DRILL_LEASE", 2*time.Second)
	cfg.Node.PollWait = 200 * time.Millisecond
	// Rows a killed process committed but never published wait RecoveryAge for the sweep.
	cfg.Outbox.RecoveryAge = envDuration("DRILL_RECOVERY_AGE", 3*time.Second)
	cfg.Outbox.SweepInterval = time.Second
	app, err := txmq.Open(ctx, cfg)
	if err != nil {
		return err
	}
	if app.Store == nil {
		return fmt.Errorf("drillapp needs TXMQ_DATABASE_URL")
	}
	schema := pgx.Identifier{app.Store.Schema()}.Sanitize()
	for _, t := range []string{"drill_published", "drill_seen"} {
		if _, err := app.Pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+schema+"."+t+" (k text NOT NULL)"); err != nil {
			return err
		}
	}
	slow := envDuration("DRILL_SLOW", 0)
	if err := queue.Listen(app.Node, func(ctx context.Context, msgs []Drill) error {
		keys := make([]string, len(msgs))
		for i, m := range msgs {
			keys[i] = m.K
		}
		if _, err := app.Pool.Exec(ctx, "INSERT INTO "+schema+".drill_seen (k) SELECT unnest($1::text[])", keys); err != nil {
			return err
		}
		time.Sleep(slow)
		return nil
	}); err != nil {
		return err
	}
	if err := app.Node.Start(ctx); err != nil {
		return err
	}

	var id [4]byte
	_, _ = rand.Read(id[:])
	proc := hex.EncodeToString(id[:])
	stopPub := make(chan os.Signal, 1)
	signal.Notify(stopPub, syscall.SIGUSR1)
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGTERM, syscall.SIGINT)
	every := envDuration("DRILL_PUBLISH_EVERY", 5*time.Millisecond)
	fmt.Fprintln(os.Stdout, "ready", proc)
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for n := 0; ; {
		select {
		case <-tick:
			k := fmt.Sprintf("%s-%d", proc, n)
			err := app.Store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".drill_published (k) VALUES ($1)", k); err != nil {
					return err
				}
				return queue.Publish(ctx, app.Node, Drill{K: k})
			})
			if err != nil {
				log.Warn("drillapp: publish failed", "error", err)
				continue
			}
			n++
		case <-stopPub:
			tick = nil
			log.Info("drillapp: publishing stopped")
		case <-quit:
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			return app.Close(cctx)
		}
	}
}
