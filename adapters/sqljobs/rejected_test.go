package sqljobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestDatabaseRefusalIsRejected: a value PostgreSQL refuses for good (here a NUL byte in a
// text column: invalid byte sequence, 22021) is core.ErrRejected, never an outage, and the
// backend keeps working.
func TestDatabaseRefusalIsRejected(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: "bad\x00id", Queue: "q", Body: []byte(`{}`), Messages: 1})
	if !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publishing a batch id with a NUL byte: %v; want core.ErrRejected and not core.ErrBackendUnavailable", err)
	}
	publish(t, be, "q", core.NewID(), time.Time{})
}

func TestCheckSize(t *testing.T) {
	t.Parallel()
	if err := checkSize("publish", maxBatchBytes); err != nil {
		t.Fatalf("a body at the limit: %v", err)
	}
	if err := checkSize("publish", maxBatchBytes+1); !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("a body over the limit: %v; want core.ErrRejected", err)
	}
}
