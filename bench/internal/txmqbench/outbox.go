package txmqbench

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// CostResult is the outbox cost scenario's outcome: the time of each kind of call, as the
// caller sees it, and its ratio to the business transaction alone measured in the same run.
type CostResult struct {
	Pace                            time.Duration
	Rounds                          int
	Biz, Floor, RunInTx, WithTx     time.Duration // p50 of each kind of call
	BizM, FloorM, RunInTxM, WithTxM time.Duration // means
}

func (r CostResult) String() string {
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	mode := "back to back"
	if r.Pace > 0 {
		mode = fmt.Sprintf("paced, %v between calls", r.Pace)
	}
	return fmt.Sprintf("%d interleaved rounds (order shuffled per round), %s; p50 (mean) per call: business tx alone %v (%v)\n"+
		"    + a raw outbox row (floor)     %v (%v): %.2fx (%.2fx)\n"+
		"    RunInTx + 1 publish            %v (%v): %.2fx (%.2fx)\n"+
		"    WithTx + 1 publish             %v (%v): %.2fx (%.2fx)",
		r.Rounds, mode, r.Biz, r.BizM,
		r.Floor, r.FloorM, ratio(r.Floor, r.Biz), ratio(r.FloorM, r.BizM),
		r.RunInTx, r.RunInTxM, ratio(r.RunInTx, r.Biz), ratio(r.RunInTxM, r.BizM),
		r.WithTx, r.WithTxM, ratio(r.WithTx, r.Biz), ratio(r.WithTxM, r.BizM))
}

// setupStore creates a fresh outbox schema with a business table and a started Store
// publishing to be; cleanup drops everything.
func setupStore(ctx context.Context, pool *pgxpool.Pool, be txmq.Backend, logger *slog.Logger) (*outbox.Store, string, func()) {
	schema := fmt.Sprintf("bench_outbox_%d", time.Now().UnixNano())
	o := &outbox.Options{Schema: schema, Backend: be, Logger: logger}
	if err := outbox.Migrate(ctx, pool, o); err != nil {
		log.Fatal(err)
	}
	biz := pgx.Identifier{schema, "biz"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+biz+` (id bigserial PRIMARY KEY, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE `+pgx.Identifier{schema, "floor"}.Sanitize()+` (LIKE `+pgx.Identifier{schema, "txmq_outbox"}.Sanitize()+` INCLUDING ALL)`); err != nil {
		log.Fatal(err)
	}
	s, err := outbox.New(pool, o)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	return s, biz, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Close(cctx)
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
}

// floorBody is about the size of the envelope of one small message.
var floorBody = []byte(`{"v":1,"id":"06h2z6x043q4nvnw94jn5f9wzg","q":"cost","a":0,"t":"2026-12-01T03:17:37.952376905Z","ids":["06h2z6x043q4nvnw94jn5f9wzc"],"m":[1764559057952376905]}`)

const bizBody = "an order of a few hundred bytes, like a business row: 0123456789abcdefghijklmnopqrstuvwxyz 0123456789abcdefghijklmnopqrstuvwxyz 0123456789abcdefghijklmnopqrstuvwxyz"

// OutboxCost times, as its caller sees it, a business transaction (one INSERT, COMMIT) alone,
// with a raw outbox row inserted by hand (into a copy of txmq_outbox with its indexes: the
// floor of any transactional outbox), inside
// Store.RunInTx with one publish on a Try queue, and inside an app transaction with
// Store.WithTx and one publish. The four kinds run interleaved, in a shuffled order every
// round (the background work a call leaves, such as RunInTx's after-commit publish or the
// relay woken by WithTx, falls on every kind alike), rounds times each, on a node listening to
// the queue (messages are consumed). pace > 0 sleeps that long before each call, so that
// calls are timed with the background work of the previous one done: the caller's cost in
// isolation; pace 0 runs them back to back.
func OutboxCost(ctx context.Context, pool *pgxpool.Pool, be txmq.Backend, rounds int, pace time.Duration, logger *slog.Logger) CostResult {
	s, biz, cleanup := setupStore(ctx, pool, be, logger)
	defer cleanup()
	floor := biz[:len(biz)-len(`"biz"`)] + `"floor"`
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "cost", txmq.QueueConfig[int64]{Transactional: txmq.Try})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: logger, Handoff: s})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Listen(node, func(context.Context, []int64) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	insert := `INSERT INTO ` + biz + ` (body) VALUES ($1)`
	kinds := []func() error{
		func() error { // business transaction alone
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, insert, bizBody)
				return err
			})
		},
		func() error { // floor: the same plus one raw outbox row
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, insert, bizBody); err != nil {
					return err
				}
				var id int64
				return tx.QueryRow(ctx, `INSERT INTO `+floor+` (queue, batch_id, body, not_before, exclusive) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
					"cost", fmt.Sprint(time.Now().UnixNano()), floorBody, nil, false).Scan(&id)
			})
		},
		func() error { // RunInTx
			return s.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, insert, bizBody); err != nil {
					return err
				}
				return q.Publish(ctx, node, time.Now().UnixNano())
			})
		},
		func() error { // WithTx
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, insert, bizBody); err != nil {
					return err
				}
				return q.Publish(s.WithTx(ctx, tx), node, time.Now().UnixNano())
			})
		},
	}
	times := make([][]time.Duration, len(kinds))
	rng := rand.New(rand.NewPCG(1, 2))
	for r := range rounds + rounds/10 { // the first tenth warms up
		for _, k := range rng.Perm(len(kinds)) {
			if pace > 0 {
				time.Sleep(pace)
			}
			start := time.Now()
			if err := kinds[k](); err != nil {
				log.Fatalf("outbox cost, kind %d: %v", k, err)
			}
			if r >= rounds/10 {
				times[k] = append(times[k], time.Since(start))
			}
		}
	}
	p50 := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	mean := func(d []time.Duration) time.Duration {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return sum / time.Duration(len(d))
	}
	return CostResult{Pace: pace, Rounds: rounds,
		Biz: p50(times[0]), Floor: p50(times[1]), RunInTx: p50(times[2]), WithTx: p50(times[3]),
		BizM: mean(times[0]), FloorM: mean(times[1]), RunInTxM: mean(times[2]), WithTxM: mean(times[3])}
}

// TxLatency publishes n single messages, one RunInTx transaction each, to an idle node
// listening on be, and returns the p50 and p99 of the time from Publish (inside the
// transaction, before its commit) to the listener.
func TxLatency(ctx context.Context, pool *pgxpool.Pool, be txmq.Backend, n int, logger *slog.Logger) (time.Duration, time.Duration) {
	s, _, cleanup := setupStore(ctx, pool, be, logger)
	defer cleanup()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "txlat", txmq.QueueConfig[int64]{Transactional: txmq.Require})
	opts := &txmq.NodeOptions{Registry: reg, Logger: logger, Handoff: s}
	return pickup(ctx, q, be, opts, n, func(ctx context.Context, node *txmq.Node) error {
		return s.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error {
			return q.Publish(ctx, node, time.Now().UnixNano())
		})
	})
}

// TxPickup publishes n single messages, one RunInTx transaction each, at rate transactions
// per second (each started at its due time, or at once when the previous one ran late), to a
// node listening on be, and returns the p50, p99 and max of the time from Publish (inside the
// transaction, before its commit) to the listener.
func TxPickup(ctx context.Context, pool *pgxpool.Pool, be txmq.Backend, n, rate int, logger *slog.Logger) (p50, p99, top time.Duration) {
	s, _, cleanup := setupStore(ctx, pool, be, logger)
	defer cleanup()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "txpick", txmq.QueueConfig[int64]{Transactional: txmq.Require})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: logger, Handoff: s})
	if err != nil {
		log.Fatal(err)
	}
	lat := make(chan time.Duration, n)
	if err := q.Listen(node, func(_ context.Context, ms []int64) error {
		for _, sent := range ms {
			lat <- time.Since(time.Unix(0, sent))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	time.Sleep(300 * time.Millisecond)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		if err := s.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error {
			return q.Publish(ctx, node, time.Now().UnixNano())
		}); err != nil {
			log.Fatal(err)
		}
	}
	out := make([]time.Duration, 0, n)
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case d := <-lat:
			out = append(out, d)
		case <-timeout:
			log.Fatalf("transactional pickup: %d of %d messages delivered within 30 s", len(out), n)
		}
	}
	p50, p99 = Percentiles(out)
	return p50, p99, out[len(out)-1].Round(10 * time.Microsecond)
}
