package appdb_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/mysql/appdb"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
)

// timingBackend records when each message number was published.
type timingBackend struct {
	fakeBackend
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
		var v msg
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

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestFigures prints, in one run, the cost of RunInSQLTx over the business transaction alone
// (interleaved rounds) and the pickup (commit to backend publish) for the committing process
// (woken in-process) and for another one (polling). Run with TXMQ_APPDB_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("TXMQ_APPDB_FIGURES") == "" {
		t.Skip("set TXMQ_APPDB_FIGURES=1 to measure")
	}
	ctx := context.Background()
	u := mysqlURL(t)
	db := openDB(t, u)
	schema := privateSchema(t, db)
	if err := appdb.Migrate(ctx, db, schema); err != nil {
		t.Fatal(err)
	}
	biz := "`" + schema + "`.biz"
	if _, err := db.Exec("CREATE TABLE " + biz + " (id INT PRIMARY KEY) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	be := &timingBackend{at: map[int]time.Time{}}
	d, _ := appdb.NewDialect(db, schema)
	committer := must(outbox.NewWithDialect(d, &outbox.Options{Backend: be, Logger: quiet}))
	if err := committer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer committer.Close(ctx)
	reg := txmq.NewRegistry()
	q := must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	node := must(txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet}))
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
				return q.Publish(ctx, node, msg{id})
			}); err != nil {
				t.Fatal(err)
			}
		}
		withOutbox = append(withOutbox, time.Since(start)/per)
	}
	a, w := pct(alone, 0.5), pct(withOutbox, 0.5)
	fmt.Printf("figures[mariadb]: business tx alone %v/tx, with RunInSQLTx + 1 publish %v/tx (median of %d interleaved rounds of %d): ratio %.2f\n",
		a.Round(time.Microsecond), w.Round(time.Microsecond), rounds, per, float64(w)/float64(a))

	// Pickup: commit to the backend's publish, one transaction at a time.
	pickup := func(s *outbox.Store, wake bool, n int) []time.Duration {
		var out []time.Duration
		for range n {
			id++
			var committed time.Time
			if wake {
				if err := s.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
					return q.Publish(ctx, node, msg{id})
				}); err != nil {
					t.Fatal(err)
				}
				committed = time.Now()
			} else { // an app-managed transaction: no wake-up, the relay's poll finds it
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.Publish(s.WithSQLTx(ctx, tx), node, msg{id}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				committed = time.Now()
			}
			waitFor(t, 10*time.Second, "the publish", func() bool { _, ok := be.when(id); return ok })
			at, _ := be.when(id)
			out = append(out, at.Sub(committed))
		}
		return out
	}
	own := pickup(committer, true, 200)
	other := pickup(committer, false, 60)
	fmt.Printf("figures[mariadb]: pickup, committing process (woken): p50 %v p99 %v; another process (poll 250 ms): p50 %v p99 %v\n",
		pct(own, 0.5).Round(time.Microsecond), pct(own, 0.99).Round(time.Microsecond),
		pct(other, 0.5).Round(time.Millisecond), pct(other, 0.99).Round(time.Millisecond))
}

// TestControlFigures prints, in one run of interleaved rounds, what the control tables cost
// beside a RunInSQLTx with one publish (the anchor): a rate-limit Take (what a node pays per
// fetch of a rate-limited queue), a pause read (per NodeOptions.PauseCheck) and a tick's claim
// with its one message (per tick, on the node that wins it). Run with TXMQ_APPDB_FIGURES=1.
func TestControlFigures(t *testing.T) {
	if os.Getenv("TXMQ_APPDB_FIGURES") == "" {
		t.Skip("set TXMQ_APPDB_FIGURES=1 to measure")
	}
	e := setup(t, nil)
	ctx := context.Background()
	limit := core.RateLimit{Batches: 1_000_000, Per: time.Second, Burst: 1_000_000}
	if err := e.store.Pauses().Pause(ctx, "notes", "figures"); err != nil {
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
			if err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
				return e.orders.Publish(ctx, e.node, msg{id})
			}); err != nil {
				t.Fatal(err)
			}
		}
		anchor = append(anchor, time.Since(start)/per)
		start = time.Now()
		for range per {
			if _, _, err := e.store.Limits().Take(ctx, "orders", 1, limit); err != nil {
				t.Fatal(err)
			}
		}
		take = append(take, time.Since(start)/per)
		start = time.Now()
		for range per {
			if _, err := e.store.Pauses().Paused(ctx); err != nil {
				t.Fatal(err)
			}
		}
		paused = append(paused, time.Since(start)/per)
		start = time.Now()
		for range per {
			id++
			tick = tick.Add(time.Second)
			if ok, err := e.store.Ticks().ClaimTick(ctx, "figures", "orders", tick, tick.Add(time.Second), func(ctx context.Context) error {
				return e.orders.Publish(ctx, e.node, msg{id})
			}); !ok || err != nil {
				t.Fatalf("ClaimTick = %v, %v", ok, err)
			}
		}
		claim = append(claim, time.Since(start)/per)
	}
	a := pct(anchor, 0.5)
	ratio := func(d []time.Duration) string {
		m := pct(d, 0.5)
		return fmt.Sprintf("%v (%.2f)", m.Round(time.Microsecond), float64(m)/float64(a))
	}
	fmt.Printf("figures[mariadb]: medians of %d interleaved rounds of %d, ratio to RunInSQLTx + 1 publish (%v): rate-limit Take %s, pause read %s, tick claim + 1 publish %s\n",
		rounds, per, a.Round(time.Microsecond), ratio(take), ratio(paused), ratio(claim))
}
