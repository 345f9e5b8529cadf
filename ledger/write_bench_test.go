package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// BenchmarkLedgerWrite measures the ledger's own cost, apart from any backend: b.N messages in
// batches of 100 each go through the events a node records (stored, running, completed), 20
// batches per grouped write (one Flush per event kind), and it reports the write-ahead log per
// message (the database is shared: compare runs of one machine, best of several). b.N counts
// messages:
//
//	go test -run '^$' -bench LedgerWrite -benchtime 20000x -count 5 ./ledger
func BenchmarkLedgerWrite(b *testing.B) {
	pool := testenv.PostgresPool(b)
	o := ledger.Options{Schema: testenv.PostgresSchema(b, pool), NoPrune: true, FlushInterval: time.Hour, FlushSize: 1 << 30}
	ctx := context.Background()
	if err := ledger.Migrate(ctx, pool, &o); err != nil {
		b.Fatal(err)
	}
	l, err := ledger.New(pool, &o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	const perBatch, perWrite = 100, 20
	batches := (b.N + perBatch - 1) / perBatch
	ids := make([][]string, batches)
	for i := range ids {
		for range min(perBatch, b.N-i*perBatch) {
			ids[i] = append(ids[i], core.NewID())
		}
	}
	var walStart string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&walStart); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for first := 0; first < batches; first += perWrite {
		for _, s := range []core.MessageState{core.StateQueued, core.StateRunning, core.StateCompleted} {
			for i := first; i < min(first+perWrite, batches); i++ {
				now := time.Now()
				l.RecordBatch(core.BatchEvent{Queue: "bench", BatchID: fmt.Sprint("b", i), IDs: ids[i], State: s, PublishedAt: now, UpdatedAt: now, Node: "n", Runs: 1})
			}
			if err := l.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	var wal float64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)`, walStart).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(b.N), "WAL-B/msg")
}
