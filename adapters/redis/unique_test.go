package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestUniquePublishCost measures what a unique publish costs against a plain one, in one run of
// interleaved rounds: a plain batch, a unique batch with a new key (UniqueUntilDone) and a
// repeat of a held key (nothing stored). Opt-in: TXMQ_BENCH_UNIQUE=1.
func TestUniquePublishCost(t *testing.T) {
	if os.Getenv("TXMQ_BENCH_UNIQUE") == "" {
		t.Skip("set TXMQ_BENCH_UNIQUE=1 to measure the publish cost of a unique key")
	}
	be := newTestBackend(t, uniquePrefix(t), nil)
	ctx := context.Background()
	const rounds = 2000
	var took [3]time.Duration
	for r := range rounds {
		steps := []func() error{
			func() error {
				return be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("p-%d", r), Queue: "plain", Body: []byte("{}"), Messages: 1})
			},
			func() error {
				return be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("u-%d", r), Queue: "uniq", Body: []byte("{}"), Messages: 1,
					Unique: core.Unique{Key: fmt.Sprintf("k%d", r), Mode: core.UniqueUntilDone}})
			},
			func() error {
				err := be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("d-%d", r), Queue: "uniq", Body: []byte("{}"), Messages: 1,
					Unique: core.Unique{Key: fmt.Sprintf("k%d", r), Mode: core.UniqueUntilDone}})
				if !errors.Is(err, core.ErrUniqueHeld) {
					return fmt.Errorf("repeat of a held key: %v, want ErrUniqueHeld", err)
				}
				return nil
			},
		}
		order := []int{0, 1, 2}
		if r%2 == 1 {
			order = []int{1, 0, 2}
		}
		for _, k := range order {
			start := time.Now()
			if err := steps[k](); err != nil {
				t.Fatal(err)
			}
			took[k] += time.Since(start)
		}
	}
	t.Logf("%d rounds: plain %v, unique new key %v (%.2fx), repeat of a held key %v (%.2fx)", rounds,
		took[0], took[1], float64(took[1])/float64(took[0]), took[2], float64(took[2])/float64(took[0]))
}

// TestUniqueKeysPruned: the key hash forgets the keys whose batch is gone and whose window
// passed, as later unique publishes go by, and keeps the ones still held.
func TestUniqueKeysPruned(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	be := newTestBackend(t, prefix, nil)
	ctx := context.Background()
	const gone, live = 300, 20
	for i := range gone {
		must(t, be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("g-%d", i), Queue: "q", Body: []byte("{}"), Messages: 1,
			Unique: core.Unique{Key: fmt.Sprintf("g%d", i), Mode: core.UniqueUntilDone}}))
	}
	for acked := 0; acked < gone; {
		cs := fetch(t, be, all("q"))
		if len(cs) == 0 {
			t.Fatalf("%d of %d batches claimed and acked, then none left to claim", acked, gone)
		}
		for _, c := range cs {
			must(t, be.Ack(ctx, c))
		}
		acked += len(cs)
	}
	for i := range live {
		must(t, be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("l-%d", i), Queue: "q", Body: []byte("{}"), Messages: 1,
			Unique: core.Unique{Key: fmt.Sprintf("l%d", i), Mode: core.UniqueUntilDone}}))
	}
	hash := be.keys.keys("q").unique[9]
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		n, err := be.rdb.HLen(ctx, hash).Result()
		must(t, err)
		if n <= live+64 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key hash still holds %d entries after %d publishes; want at most %d (the %d held keys and the prune's threshold)", n, i, live+64, live)
		}
		// Repeats of a held key: nothing stored, but each call may prune.
		err = be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("r-%d", i), Queue: "q", Body: []byte("{}"), Messages: 1,
			Unique: core.Unique{Key: "l0", Mode: core.UniqueUntilDone}})
		if !errors.Is(err, core.ErrUniqueHeld) {
			t.Fatalf("repeat of held key l0: %v, want ErrUniqueHeld", err)
		}
	}
	for i := range live {
		err := be.Publish(ctx, core.OutgoingBatch{ID: fmt.Sprintf("x-%d", i), Queue: "q", Body: []byte("{}"), Messages: 1,
			Unique: core.Unique{Key: fmt.Sprintf("l%d", i), Mode: core.UniqueUntilDone}})
		if !errors.Is(err, core.ErrUniqueHeld) {
			t.Fatalf("key l%d, still held, after the prune: %v, want ErrUniqueHeld", i, err)
		}
	}
}
