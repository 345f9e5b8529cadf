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
	"github.com/txmq/txmq/adapters/sqlite/appdb"
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
// (woken in-process) and for another one (polling), on a file in the test's temp dir. Run
// with TXMQ_APPDB_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("TXMQ_APPDB_FIGURES") == "" {
		t.Skip("set TXMQ_APPDB_FIGURES=1 to measure")
	}
	ctx := context.Background()
	db, _ := openFile(t) // OpenDB's defaults: WAL, synchronous=FULL, _txlock=immediate
	biz := "biz"
	if _, err := db.Exec("CREATE TABLE " + biz + " (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	be := &timingBackend{at: map[int]time.Time{}}
	d, _ := appdb.NewDialect(db)
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
	fmt.Printf("figures[sqlite]: business tx alone %v/tx, with RunInSQLTx + 1 publish %v/tx (median of %d interleaved rounds of %d): ratio %.2f\n",
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
	fmt.Printf("figures[sqlite]: pickup, committing process (woken): p50 %v p99 %v; another process (poll 250 ms): p50 %v p99 %v\n",
		pct(own, 0.5).Round(time.Microsecond), pct(own, 0.99).Round(time.Microsecond),
		pct(other, 0.5).Round(time.Millisecond), pct(other, 0.99).Round(time.Millisecond))
}
