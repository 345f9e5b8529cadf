package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// BenchmarkClaim measures one claim of a queue holding 10,000 ready batches of priorities 0
// to 9, read as a plain queue (one scan of the claim index) and as a prioritized one (ten
// scans of the priority index, ranked by run_at - lead), claiming 1 and 100 batches. The
// lease is a microsecond, so the claimed rows are ready again at the next claim and every
// iteration claims from the same backlog.
//
//	go test -run '^$' -bench BenchmarkClaim ./adapters/sqlite
func BenchmarkClaim(b *testing.B) {
	w := newWorld(b)
	be := w.backend(nil)
	ctx := context.Background()
	const rows = 10000
	err := be.inTx(ctx, func(tx execer) error {
		for i := range rows {
			p := i % 10
			ob := core.OutgoingBatch{ID: fmt.Sprint("b", i), Queue: "q", Body: make([]byte, 256), Messages: 1,
				Priority: p, Lead: core.PriorityLead(p, time.Second)}
			if _, err := tx.ExecContext(ctx, sqlPublish, publishArgs(ob, ob.Body, 0)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, free := range []int{1, 100} {
		for _, prio := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/prioritized=%v", free, prio), func(b *testing.B) {
				req := core.FetchRequest{Node: "n", Lease: time.Microsecond, Max: free,
					Queues: []core.QueueSlots{{Queue: "q", Free: free, Prioritized: prio}}}
				for b.Loop() {
					cs, err := be.Fetch(ctx, req)
					if err != nil || len(cs) != free {
						b.Fatalf("fetch: %d claims, %v; want %d", len(cs), err, free)
					}
				}
			})
		}
	}
}

// BenchmarkClaimLimit measures one claim of a queue holding 10,000 ready batches and 1,000
// in flight (leased for an hour), without a cluster-wide limit and with one that never binds
// (so the claim counts the 1,000 running leases each time), claiming 1 and 100 batches, as
// BenchmarkClaim does.
//
//	go test -run '^$' -bench BenchmarkClaimLimit ./adapters/sqlite
func BenchmarkClaimLimit(b *testing.B) {
	w := newWorld(b)
	be := w.backend(nil)
	ctx := context.Background()
	const ready, running = 10000, 1000
	err := be.inTx(ctx, func(tx execer) error {
		for i := range ready + running {
			ob := core.OutgoingBatch{ID: fmt.Sprint("b", i), Queue: "q", Body: make([]byte, 256), Messages: 1}
			if _, err := tx.ExecContext(ctx, sqlPublish, publishArgs(ob, ob.Body, 0)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := be.Fetch(ctx, core.FetchRequest{Node: "n", Lease: time.Hour, Max: running, Queues: []core.QueueSlots{{Queue: "q", Free: running}}})
	if err != nil || len(cs) != running {
		b.Fatalf("leasing %d batches: %d, %v", running, len(cs), err)
	}
	for _, free := range []int{1, 100} {
		for _, limit := range []int{0, 1 << 20} {
			b.Run(fmt.Sprintf("batch=%d/limit=%v", free, limit > 0), func(b *testing.B) {
				req := core.FetchRequest{Node: "n", Lease: time.Microsecond, Max: free,
					Queues: []core.QueueSlots{{Queue: "q", Free: free, Limit: limit}}}
				for b.Loop() {
					cs, err := be.Fetch(ctx, req)
					if err != nil || len(cs) != free {
						b.Fatalf("fetch: %d claims, %v; want %d", len(cs), err, free)
					}
				}
			})
		}
	}
}
