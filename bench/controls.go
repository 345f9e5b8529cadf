package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/mysql"   // mysql://
	_ "github.com/txmq/txmq/adapters/redis"   // redis://
	_ "github.com/txmq/txmq/adapters/sqlite"  // sqlite://
	_ "github.com/txmq/txmq/adapters/sqljobs" // postgres://
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

// The controls scenario: what each scheduling control costs on each adapter, as the ratio of
// a queue with the control on to the same queue without it, in interleaved rounds of one run.
var (
	ctlBackends = flag.String("ctl-backends", "", "controls scenario: backend URLs, comma-separated (default: memory://, -url, redis://127.0.0.1:6379/15, mysql://root@127.0.0.1:3306/test, sqlite://<temp dir>/ctl.db)")
	ctlSides    = flag.String("ctl-sides", "plain,prio,fair,limit,unique", "controls scenario: sides of each round, in order: plain, prio (Prioritized, priorities 0-9 in turn per publish call), fair (Fair, 10 keys in turn per publish call), limit (ClusterLimit 1000, never binding), unique (Unique UniqueUntilDone, ByPayload, every message distinct)")
	ctlBatches  = flag.String("ctl-batches", "1,100", "controls scenario: MaxBatchMessages values")
	ctlN1       = flag.Int("ctl-n1", 2000, "controls scenario: messages per burn-down at 1 message per batch")
	ctlN100     = flag.Int("ctl-n100", 20000, "controls scenario: messages per burn-down at more than 1 message per batch")
	ctlUniqueN  = flag.Int("ctl-unique-n", 2000, "controls scenario: messages per burn-down of the unique side at any batch size (a unique message is a batch of its own)")
	ctlRounds   = flag.Int("ctl-rounds", 3, "controls scenario: interleaved rounds (one burn-down of each side per round)")
	ctlWorkers  = flag.Int("ctl-workers", 50, "controls scenario: MaxConcurrentBatches of the consuming node (mysql:// uses -ctl-mysql-workers)")
	ctlMyWork   = flag.Int("ctl-mysql-workers", 20, "controls scenario: MaxConcurrentBatches on mysql:// (the shared MariaDB allows 151 connections)")
)

// ctlChunk is the number of messages per publish call: one batch at 100 messages per batch;
// the priority and the fairness key change from one call to the next.
const ctlChunk = 100

// errRefused marks a side the backend refused: the figure is the refusal.
var errRefused = errors.New("refused")

// ctlQueue declares the side's queue in a new registry.
func ctlQueue(side, name string, batch, workers int) (*txmq.Registry, *txmq.Queue[benchMsg]) {
	cfg := txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: batch, MaxConcurrentBatches: txmq.Cap(workers)}
	switch side {
	case "plain":
	case "prio":
		cfg.Prioritized = true
	case "fair":
		cfg.Fair = true
	case "limit":
		cfg.ClusterLimit = 1000
	case "unique":
		cfg.Unique = txmq.Unique{Mode: txmq.UniqueUntilDone, ByPayload: true}
	default:
		log.Fatalf("-ctl-sides: unknown side %q; use plain, prio, fair, limit or unique", side)
	}
	reg := txmq.NewRegistry()
	return reg, txmq.MustDeclareIn(reg, name, cfg)
}

// ctlFill stores n messages of the side's queue on be through a node of its own, in calls of
// ctlChunk messages, and returns the registry and queue for BurnDown, and how long the
// publishing took (to the node's Close, which flushes). An error is the backend refusing the
// side's setting.
func ctlFill(ctx context.Context, be txmq.Backend, side, name string, batch, n, workers int) (*txmq.Registry, *txmq.Queue[benchMsg], time.Duration, error) {
	reg, q := ctlQueue(side, name, batch, workers)
	pub, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", errRefused, err)
	}
	if err := pub.Start(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", errRefused, err)
	}
	start := time.Now()
	chunk := make([]benchMsg, 0, ctlChunk)
	for i, c := 0, 0; i < n; i++ {
		chunk = append(chunk, benchMsg{ID: i})
		if len(chunk) < cap(chunk) && i < n-1 {
			continue
		}
		var opts []txmq.PublishOption
		switch side {
		case "prio":
			opts = append(opts, txmq.Priority(c%10))
		case "fair":
			opts = append(opts, txmq.FairKey(fmt.Sprintf("tenant%d", c%10)))
		}
		if err := q.PublishMany(ctx, pub, chunk, opts...); err != nil {
			_ = pub.Close(ctx)
			return nil, nil, 0, fmt.Errorf("%w: %v", errRefused, err)
		}
		chunk, c = chunk[:0], c+1
	}
	if err := pub.Close(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", errRefused, err)
	}
	took := time.Since(start)
	if st := pub.Stats(); st.PublishedMessages != int64(n) {
		log.Fatalf("%s: the publishing node stored %d of %d messages (deduplicated %d, dropped %v)", name, st.PublishedMessages, n, st.Deduplicated, st.Dropped)
	}
	return reg, q, took, nil
}

// burnDown times one node delivering the n stored messages of q (see txmqbench.BurnDown).
func burnDown(ctx context.Context, be txmq.Backend, reg *txmq.Registry, q *txmq.Queue[benchMsg], n int) time.Duration {
	return txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet, nil, nil)
}

// ctlResult is one side's burn-downs: messages/s of the publishing and of the consuming.
type ctlResult struct {
	fill, drain []float64
	refused     error
}

// defaultBackends are the controls scenario's backends when -ctl-backends is empty.
func defaultBackends() []string {
	dir, err := os.MkdirTemp("", "txmq-bench-ctl")
	if err != nil {
		log.Fatal(err)
	}
	return []string{"memory://", *dbURL, "redis://127.0.0.1:6379/15", "mysql://root@127.0.0.1:3306/test", "sqlite://" + filepath.Join(dir, "ctl.db")}
}

// scheme returns the URL's scheme, the adapter's name in the output.
func scheme(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Scheme
}

// runControls runs the controls scenario on every backend in turn and prints each round and
// the summary with the on/off ratios.
func runControls(ctx context.Context) {
	backends := defaultBackends()
	if *ctlBackends != "" {
		backends = strings.Split(*ctlBackends, ",")
	}
	sides := strings.Split(*ctlSides, ",")
	var batches []int
	for _, s := range strings.Split(*ctlBatches, ",") {
		var b int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &b); err != nil || b < 1 {
			log.Fatalf("-ctl-batches: %q is not a positive number", s)
		}
		batches = append(batches, b)
	}
	fmt.Printf("controls: %d interleaved rounds of %s per adapter and batch size; publish calls of %d messages (priority c%%10 and key tenant(c%%10) of call c), then a timed burn-down by one node with a no-op listener\n",
		*ctlRounds, strings.Join(sides, ", "), ctlChunk)
	for _, raw := range backends {
		raw = strings.TrimSpace(raw)
		name := scheme(raw)
		workers := *ctlWorkers
		if name == "mysql" || name == "mariadb" {
			workers = *ctlMyWork
		}
		be, err := txmq.OpenBackend(ctx, raw)
		if err != nil {
			log.Fatalf("open %s: %v", name, err)
		}
		fmt.Printf("%s: MaxConcurrentBatches %d; load average at start %s\n", name, workers, loadAvg())
		for _, batch := range batches {
			n := *ctlN100
			if batch == 1 {
				n = *ctlN1
			}
			res := map[string]*ctlResult{}
			for _, s := range sides {
				res[s] = &ctlResult{}
			}
			for r := range *ctlRounds {
				for _, side := range sides {
					cr := res[side]
					if cr.refused != nil {
						continue
					}
					q := fmt.Sprintf("ctl-%s-%d-%d-%d", side, batch, r, time.Now().UnixNano())
					n := n
					if side == "unique" {
						n = *ctlUniqueN
					}
					reg, qq, took, err := ctlFill(ctx, be, side, q, batch, n, workers)
					if err != nil {
						cr.refused = err
						fmt.Printf("  %s batch %d %-6s %v\n", name, batch, side, err)
						continue
					}
					d := burnDown(ctx, be, reg, qq, n)
					cr.fill = append(cr.fill, float64(n)/took.Seconds())
					cr.drain = append(cr.drain, float64(n)/d.Seconds())
					fmt.Printf("  round %d %s batch %3d %-6s publish %8.0f msgs/s  burn-down %8.0f msgs/s\n", r+1, name, batch, side, cr.fill[r], cr.drain[r])
				}
			}
			ctlSummary(name, batch, n, sides, res)
		}
		fmt.Printf("%s: load average at end %s\n", name, loadAvg())
		_ = be.Close()
	}
}

// ctlSummary prints min / median / max per side and the ratios to plain (ratio of medians,
// and the per-round ratios' min / median / max).
func ctlSummary(name string, batch, n int, sides []string, res map[string]*ctlResult) {
	fmt.Printf("summary %s, %d msgs/batch, %d messages (unique: %d; min / median / max msgs/s; on/off = side / plain):\n", name, batch, n, *ctlUniqueN)
	plain := res["plain"]
	for _, side := range sides {
		cr := res[side]
		if cr.refused != nil {
			fmt.Printf("  %-6s refused (the node's error is above)\n", side)
			continue
		}
		line := fmt.Sprintf("  %-6s burn-down %s, publish %s", side, spreadOf(cr.drain, "%.0f"), spreadOf(cr.fill, "%.0f"))
		if side != "plain" && plain != nil && len(plain.drain) == len(cr.drain) {
			per := make([]float64, len(cr.drain))
			for i := range per {
				per[i] = cr.drain[i] / plain.drain[i]
			}
			line += fmt.Sprintf("; on/off burn-down %.2fx (rounds %s), publish %.2fx",
				median(cr.drain)/median(plain.drain), spreadOf(per, "%.2fx"), median(cr.fill)/median(plain.fill))
		}
		fmt.Println(line)
	}
}
