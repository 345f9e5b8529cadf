package sqljobs

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestUniquePublishCost measures what a unique publish costs against a plain one, in one run of
// interleaved rounds: a plain batch, a unique batch with a new key (UniqueUntilDone: the key's
// row inserted, the batch stored, the key moved) and a repeat of a held key (the row locked,
// the holder read, nothing stored). Opt-in: TXMQ_BENCH_UNIQUE=1.
func TestUniquePublishCost(t *testing.T) {
	if os.Getenv("TXMQ_BENCH_UNIQUE") == "" {
		t.Skip("set TXMQ_BENCH_UNIQUE=1 to measure the publish cost of a unique key")
	}
	w := newWorld(t)
	be := w.backend(nil)
	const rounds = 1000
	var took [3]time.Duration
	for r := range rounds {
		steps := []func() error{
			func() error {
				return be.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("p-%d", r), Queue: "plain", Body: []byte("{}"), Messages: 1})
			},
			func() error {
				return be.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("u-%d", r), Queue: "uniq", Body: []byte("{}"), Messages: 1,
					Unique: core.Unique{Key: fmt.Sprintf("k%d", r), Mode: core.UniqueUntilDone}})
			},
			func() error {
				err := be.Publish(ctxT(t), core.OutgoingBatch{ID: fmt.Sprintf("d-%d", r), Queue: "uniq", Body: []byte("{}"), Messages: 1,
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
