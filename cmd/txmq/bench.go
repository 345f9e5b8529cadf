package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register(&command{name: "bench", summary: "end-to-end benchmark on a backend URL: messages/s and pickup p50/p99", run: runBench})
}

const benchSynopsis = `bench --backend URL [--messages N] [--batch 100] [--concurrency C] [--size BYTES]
             [--rate MSGS_PER_S --duration D] [--json] [--cpuprofile FILE]

Runs one node on the backend with a new queue (bench-<random>), publishes --messages messages in
a burst (or, with --rate, at a steady rate for --duration), waits until every one was delivered,
and prints messages/s and pickup latency: the time from the publish call to the start of the
listener run that received the message (p50, p99, max; the publish time travels in the
message). Everything goes through the engine: the publish buffer, encoding, the backend, fetch,
decode, the listener and ack. bench --backend memory:// needs no server. The queue's batches are
all acked at the end; backends that create a resource per queue (SQS queues, NATS streams) keep
an empty one named bench-<random>.`

// benchMsg is the benchmark's message: its index, its publish time and padding.
type benchMsg struct {
	I   int    `json:"i"`
	At  int64  `json:"at"` // publish time, Unix nanoseconds
	Pad string `json:"p,omitempty"`
}

// benchResult is what bench prints.
type benchResult struct {
	Backend      string  `json:"backend"`
	Queue        string  `json:"queue"`
	Messages     int     `json:"messages"`
	Duplicates   int     `json:"duplicates"`
	PublishSec   float64 `json:"publish_seconds"`
	TotalSec     float64 `json:"total_seconds"`
	MsgsPerSec   float64 `json:"messages_per_second"`
	PickupP50Ms  float64 `json:"pickup_p50_ms"`
	PickupP99Ms  float64 `json:"pickup_p99_ms"`
	PickupMaxMs  float64 `json:"pickup_max_ms"`
	Batch        int     `json:"batch"`
	Concurrency  int     `json:"concurrency"`
	Size         int     `json:"size"`
	RatePerSec   int     `json:"rate,omitempty"`
	DurationSecs float64 `json:"duration_seconds,omitempty"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", benchSynopsis, stderr)
	backendURL := fs.String("backend", os.Getenv("TXMQ_BACKEND"), "backend URL (from $TXMQ_BACKEND when set), for example memory:// or redis://127.0.0.1:6379/0")
	messages := fs.Int("messages", 10000, "messages to publish in the burst")
	batch := fs.Int("batch", 100, "the queue's MaxBatchMessages")
	conc := fs.Int("concurrency", 0, "the queue's MaxConcurrentBatches on the node (0: no cap)")
	size := fs.Int("size", 100, "approximate message size in bytes")
	rate := fs.Int("rate", 0, "steady mode: publish this many messages per second (with --duration)")
	duration := fs.Duration("duration", 0, "steady mode: publish for this long (with --rate)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	asJSON := fs.Bool("json", false, "print JSON")
	verbose := fs.Bool("v", false, "print the engine's logs")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *backendURL == "":
		return &usageError{msg: "no backend: set --backend URL (or TXMQ_BACKEND), for example --backend memory://"}
	case *messages < 1:
		return &usageError{msg: "--messages must be at least 1"}
	case *batch < 1:
		return &usageError{msg: "--batch must be at least 1"}
	case *conc < 0:
		return &usageError{msg: "--concurrency must be 0 (no cap) or more"}
	case *size < 0:
		return &usageError{msg: "--size must be 0 or more"}
	case (*rate > 0) != (*duration > 0), *rate < 0, *duration < 0:
		return &usageError{msg: "steady mode needs both --rate (messages per second) and --duration"}
	}
	n := *messages
	if *rate > 0 {
		n = max(1, int(float64(*rate)*duration.Seconds()))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// TXMQ_SCHEMA applies to a postgres:// backend as it does in the app (see txmq.Config.Schema).
	_, benchURL, err := outbox.ResolveSchema(os.Getenv("TXMQ_SCHEMA"), *backendURL, outbox.SchemaSettingNames{Schema: "TXMQ_SCHEMA", Backend: "--backend URL"})
	if err != nil {
		return &usageError{msg: core.RedactText(strings.TrimPrefix(err.Error(), core.ErrInvalidConfig.Error()+": "), *backendURL)}
	}
	be, err := openBackend(ctx, backendSetting, benchURL, true)
	if err != nil {
		return err
	}
	defer func() { _ = be.Close() }()
	reg := txmq.NewRegistry()
	qcfg := txmq.QueueConfig[benchMsg]{Transactional: txmq.Never, MaxBatchMessages: *batch}
	if *conc > 0 {
		qcfg.MaxConcurrentBatches = txmq.Cap(*conc)
	}
	qname := "bench-" + strings.ToLower(core.NewID())
	if len(qname) > 40 {
		qname = qname[:40]
	}
	q, err := txmq.DeclareIn(reg, qname, qcfg)
	if err != nil {
		return err
	}
	logLevel := slog.LevelError + 1
	if *verbose {
		logLevel = slog.LevelInfo
	}
	dropped := make(chan string, 1)
	node, err := txmq.NewNode(be, &txmq.NodeOptions{
		Registry: reg,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel})),
		Hooks: &txmq.Hooks{Dropped: func(_ string, reason string, messages int) {
			select {
			case dropped <- fmt.Sprintf("%d messages dropped (reason %s)", messages, reason):
			default:
			}
		}},
	})
	if err != nil {
		return err
	}
	rec := newPickups(n)
	if err := q.Listen(node, func(_ context.Context, msgs []benchMsg) error {
		rec.record(time.Now(), msgs)
		return nil
	}); err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = node.Close(context.WithoutCancel(ctx)) }()

	pad := strings.Repeat("x", max(0, *size-40))
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	pubErr := make(chan error, 1)
	go func() { pubErr <- benchPublish(ctx, q, node, n, *rate, pad) }()
	var published time.Duration
	doneCh := rec.done
	for published == 0 || !rec.complete() {
		select {
		case err := <-pubErr:
			if err != nil {
				return fmt.Errorf("publishing: %w", err)
			}
			published = time.Since(start)
		case <-doneCh:
			doneCh = nil
		case msg := <-dropped:
			return fmt.Errorf("the backend refused the batches and there is no outbox here: %s; is the backend reachable?", msg)
		case <-ctx.Done():
			return fmt.Errorf("delivered %d of %d messages before the --timeout of %v: %w", rec.count(), n, *timeout, ctx.Err())
		}
	}
	total := time.Since(start)
	p50, p99, pmax := rec.percentiles()
	res := benchResult{
		Backend: core.Redact(*backendURL), Queue: qname, Messages: n, Duplicates: rec.duplicates(),
		PublishSec: published.Seconds(), TotalSec: total.Seconds(), MsgsPerSec: float64(n) / total.Seconds(),
		PickupP50Ms: ms(p50), PickupP99Ms: ms(p99), PickupMaxMs: ms(pmax),
		Batch: *batch, Concurrency: *conc, Size: *size, RatePerSec: *rate, DurationSecs: duration.Seconds(),
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	capText := "no cap"
	if *conc > 0 {
		capText = fmt.Sprint(*conc)
	}
	mode := "burst"
	if *rate > 0 {
		mode = fmt.Sprintf("steady %d msgs/s for %v", *rate, *duration)
	}
	fmt.Fprintf(stdout, "backend      %s\n", res.Backend)
	fmt.Fprintf(stdout, "queue        %s (batch %d, concurrency %s, ~%d-byte messages, %s)\n", qname, *batch, capText, *size, mode)
	fmt.Fprintf(stdout, "published    %d messages in %v\n", n, published.Round(time.Millisecond))
	fmt.Fprintf(stdout, "delivered    %d messages in %v: %.0f msgs/s (%d duplicates)\n", n, total.Round(time.Millisecond), res.MsgsPerSec, res.Duplicates)
	fmt.Fprintf(stdout, "pickup       p50 %v  p99 %v  max %v\n", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), pmax.Round(10*time.Microsecond))
	return nil
}

// benchPublish publishes n messages: at once (rate 0) or at rate per second.
func benchPublish(ctx context.Context, q *txmq.Queue[benchMsg], node *txmq.Node, n, rate int, pad string) error {
	start := time.Now()
	for i := range n {
		if rate > 0 {
			due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if err := q.Publish(ctx, node, benchMsg{I: i, At: time.Now().UnixNano(), Pad: pad}); err != nil {
			return err
		}
	}
	return nil
}

// pickups records the first delivery of each message and its pickup latency.
type pickups struct {
	mu      sync.Mutex
	seen    []bool
	lat     []time.Duration
	dups    int
	done    chan struct{}
	closed  bool
	pending int
}

func newPickups(n int) *pickups {
	return &pickups{seen: make([]bool, n), lat: make([]time.Duration, 0, n), done: make(chan struct{}), pending: n}
}

func (p *pickups) record(now time.Time, msgs []benchMsg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		if m.I < 0 || m.I >= len(p.seen) {
			continue
		}
		if p.seen[m.I] {
			p.dups++
			continue
		}
		p.seen[m.I] = true
		p.pending--
		p.lat = append(p.lat, now.Sub(time.Unix(0, m.At)))
	}
	if p.pending == 0 && !p.closed {
		p.closed = true
		close(p.done)
	}
}

func (p *pickups) complete() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending == 0
}

func (p *pickups) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen) - p.pending
}

func (p *pickups) duplicates() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dups
}

func (p *pickups) percentiles() (p50, p99, pmax time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(p.lat)
	slices.Sort(s)
	at := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return at(0.50), at(0.99), s[len(s)-1]
}

// startCPUProfile starts a CPU profile written to path; the returned func stops it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
