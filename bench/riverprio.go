package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

// The riverprio scenario: River's priorities against txmq's on SQL jobs, on the same server in
// interleaved rounds: River plain, River with jobs at priorities 1-4 (InsertOpts.Priority, in
// turn per job), txmq plain and txmq Prioritized with priorities 0-9 (in turn per publish call
// of ctlChunk messages), each burning down -rounds-n stored jobs (one-message batches).
var prioSides = []string{"river", "river-prio", "txmq", "txmq-prio"}

// txmqControlRound stores n one-message batches of the side's queue (plain or prio, see
// ctlQueue) on a fresh sqljobs schema, then times one node with MaxConcurrentBatches
// -txmq-workers consuming them, as txmqRound does.
func txmqControlRound(ctx context.Context, admin *pgxpool.Pool, n int, side string) cost {
	counter := &stmtCounter{}
	pool := sidePool(ctx, "bench_txmq", counter, true, nil)
	defer pool.Close()
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg, q, _, err := ctlFill(ctx, be, side, "bench", 1, n, *txWorkers)
	if err != nil {
		log.Fatal(err)
	}
	txmqbench.WaitReady(ctx, be, []string{"bench"}, int64(n))
	analyzeTable(ctx, pool, schema, "txmq_jobs")
	var m *window
	var r cost
	txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet,
		func() { m = startWindow(ctx, admin, counter) },
		func() { r = m.stop(ctx, n) })
	return r
}

// runRiverPrio runs the riverprio scenario and prints each round and the ratios.
func runRiverPrio(ctx context.Context) {
	admin := newPool(ctx, "bench_admin")
	defer admin.Close()
	fmt.Printf("riverprio: %d interleaved rounds of %s; each burns down %d stored one-message batches (River: jobs)\n", *roundsCount, strings.Join(prioSides, ", "), *roundsN)
	fmt.Printf("  River: %s; river-prio inserts job i at InsertOpts.Priority 1+i%%4\n", riverTuned())
	fmt.Printf("  txmq: one node, MaxConcurrentBatches %d; txmq-prio is Prioritized, publish call c (of %d messages) at Priority(c%%10); each side its own pool of %d connections\n", *txWorkers, ctlChunk, *conns)
	fmt.Printf("  load average at start: %s\n", loadAvg())
	results := map[string][]cost{}
	for r := range *roundsCount {
		for _, side := range prioSides {
			var c cost
			switch side {
			case "river":
				c = riverRound(ctx, admin, *roundsN, false)
			case "river-prio":
				c = riverRound(ctx, admin, *roundsN, true)
			case "txmq":
				c = txmqControlRound(ctx, admin, *roundsN, "plain")
			case "txmq-prio":
				c = txmqControlRound(ctx, admin, *roundsN, "prio")
			}
			results[side] = append(results[side], c)
			fmt.Printf("  round %d %-10s %s\n", r+1, side, c)
		}
	}
	fmt.Printf("  load average at end: %s\n", loadAvg())
	fmt.Printf("summary (min / median / max over rounds):\n")
	for _, side := range prioSides {
		cs := results[side]
		fmt.Printf("  %-10s %s msgs/s; medians: %s\n", side, spread(cs, cost.rate, "%.0f"), medianCost(cs))
	}
	for _, p := range [][2]string{{"river-prio", "river"}, {"txmq-prio", "txmq"}, {"txmq-prio", "river-prio"}, {"txmq", "river"}} {
		a, b := results[p[0]], results[p[1]]
		per := make([]float64, len(a))
		for i := range a {
			per[i] = a[i].rate() / b[i].rate()
		}
		fmt.Printf("  %s / %s: ratio of medians %.2fx, per round %s\n", p[0], p[1], median(mapOf(a, cost.rate))/median(mapOf(b, cost.rate)), spreadOf(per, "%.2fx"))
	}
}
