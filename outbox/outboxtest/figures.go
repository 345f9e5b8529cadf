package outboxtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// timingBackend records when each message number was published.
type timingBackend struct {
	Backend
	mu sync.Mutex
	at map[int]time.Time
}

func (b *timingBackend) Publish(_ context.Context, ob core.OutgoingBatch) error {
	now := time.Now()
	env, err := envelope.Decode(ob.Body)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range env.Messages {
		var v Msg
		if json.Unmarshal(m, &v) == nil {
			b.at[v.N] = now
		}
	}
	return nil
}

func (b *timingBackend) when(n int) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.at[n]
	return t, ok
}

// Figures prints, in one run, the cost of RunInSQLTx over the business transaction alone
// (interleaved rounds) and the pickup (commit to backend publish) for the committing process
// (woken in-process) and for another one (polling). Run with
// TXMQ_APPDB_FIGURES=1.
func Figures(t *testing.T, target *Target) {
	if os.Getenv("TXMQ_APPDB_FIGURES") == "" {
		t.Skip("set TXMQ_APPDB_FIGURES=1 to measure")
	}
	ctx := context.Background()
	dbase := target.Open(t)
	db, biz := dbase.DB, dbase.Table("biz")
	if _, err := db.Exec(fmt.Sprintf(target.BizDDL, biz)); err != nil {
		t.Fatal(err)
	}
	be := &timingBackend{at: map[int]time.Time{}}
	d, _ := dbase.NewDialect(db)
	committer := Must(outbox.NewWithDialect(d, &outbox.Options{Backend: be, Logger: Quiet}))
	if err := committer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer committer.Close(ctx)
	reg := txmq.NewRegistry()
	q := Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[Msg]{Transactional: txmq.Require}))
	node := Must(txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: Quiet}))
	defer node.Close(ctx)

	const rounds, per = 10, 50
	var alone, withOutbox []time.Duration
	id := 0
	for range rounds {
		start := time.Now()
		for range per {
			id++
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+biz+" VALUES (?)", id); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		alone = append(alone, time.Since(start)/per)
		start = time.Now()
		for range per {
			id++
			if err := committer.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+biz+" VALUES (?)", id); err != nil {
					return err
				}
				return q.Publish(ctx, node, Msg{id})
			}); err != nil {
				t.Fatal(err)
			}
		}
		withOutbox = append(withOutbox, time.Since(start)/per)
	}
	a, w := Pct(alone, 0.5), Pct(withOutbox, 0.5)
	fmt.Printf("figures[%s]: business tx alone %v/tx, with RunInSQLTx + 1 publish %v/tx (median of %d interleaved rounds of %d): ratio %.2f\n",
		target.Label, a.Round(time.Microsecond), w.Round(time.Microsecond), rounds, per, float64(w)/float64(a))

	// Pickup: commit to the backend's publish, one transaction at a time.
	pickup := func(s *outbox.Store, wake bool, n int) []time.Duration {
		var out []time.Duration
		for range n {
			id++
			var committed time.Time
			if wake {
				if err := s.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
					return q.Publish(ctx, node, Msg{id})
				}); err != nil {
					t.Fatal(err)
				}
				committed = time.Now()
			} else { // an app-managed transaction: no wake-up, the relay's poll finds it
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.Publish(s.WithSQLTx(ctx, tx), node, Msg{id}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				committed = time.Now()
			}
			txmqtest.Eventually(t, 10*time.Second, func() bool { _, ok := be.when(id); return ok }, "the publish")
			at, _ := be.when(id)
			out = append(out, at.Sub(committed))
		}
		return out
	}
	own := pickup(committer, true, 200)
	other := pickup(committer, false, 60)
	fmt.Printf("figures[%s]: pickup, committing process (woken): p50 %v p99 %v; another process (poll 250 ms): p50 %v p99 %v\n", target.Label,
		Pct(own, 0.5).Round(time.Microsecond), Pct(own, 0.99).Round(time.Microsecond),
		Pct(other, 0.5).Round(time.Millisecond), Pct(other, 0.99).Round(time.Millisecond))
}

// ControlFigures prints, in one run of interleaved rounds, what the control tables cost
// beside a RunInSQLTx with one publish (the anchor): a rate-limit Take (what a node pays per
// fetch of a rate-limited queue), a pause read (per NodeOptions.PauseCheck) and a tick's claim
// with its one message (per tick, on the node that wins it). Run with TXMQ_APPDB_FIGURES=1.
func ControlFigures(t *testing.T, target *Target) {
	if os.Getenv("TXMQ_APPDB_FIGURES") == "" {
		t.Skip("set TXMQ_APPDB_FIGURES=1 to measure")
	}
	e := Setup(t, target, nil)
	ctx := context.Background()
	limit := core.RateLimit{Batches: 1_000_000, Per: time.Second, Burst: 1_000_000}
	if err := e.Store.Pauses().Pause(ctx, "notes", "figures"); err != nil {
		t.Fatal(err)
	}
	const rounds, per = 10, 50
	var anchor, take, paused, claim []time.Duration
	id := 0
	tick := time.Unix(1_700_000_000, 0)
	for range rounds {
		start := time.Now()
		for range per {
			id++
			if err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
				return e.Orders.Publish(ctx, e.Node, Msg{id})
			}); err != nil {
				t.Fatal(err)
			}
		}
		anchor = append(anchor, time.Since(start)/per)
		start = time.Now()
		for range per {
			if _, _, err := e.Store.Limits().Take(ctx, "orders", 1, limit); err != nil {
				t.Fatal(err)
			}
		}
		take = append(take, time.Since(start)/per)
		start = time.Now()
		for range per {
			if _, err := e.Store.Pauses().Paused(ctx); err != nil {
				t.Fatal(err)
			}
		}
		paused = append(paused, time.Since(start)/per)
		start = time.Now()
		for range per {
			id++
			tick = tick.Add(time.Second)
			if ok, err := e.Store.Ticks().ClaimTick(ctx, "figures", "orders", tick, tick.Add(time.Second), func(ctx context.Context) error {
				return e.Orders.Publish(ctx, e.Node, Msg{id})
			}); !ok || err != nil {
				t.Fatalf("ClaimTick = %v, %v", ok, err)
			}
		}
		claim = append(claim, time.Since(start)/per)
	}
	a := Pct(anchor, 0.5)
	ratio := func(d []time.Duration) string {
		m := Pct(d, 0.5)
		return fmt.Sprintf("%v (%.2f)", m.Round(time.Microsecond), float64(m)/float64(a))
	}
	fmt.Printf("figures[%s]: medians of %d interleaved rounds of %d, ratio to RunInSQLTx + 1 publish (%v): rate-limit Take %s, pause read %s, tick claim + 1 publish %s\n",
		target.Label, rounds, per, a.Round(time.Microsecond), ratio(take), ratio(paused), ratio(claim))
}
