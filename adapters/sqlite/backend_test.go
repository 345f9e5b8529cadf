package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestNewNeedsMigrate: New on a file without the jobs tables says to run Migrate; Migrate
// twice is a no-op and leaves the file in WAL mode; bad options name the field.
func TestNewNeedsMigrate(t *testing.T) {
	t.Parallel()
	db, err := OpenDB(filepath.Join(t.TempDir(), "fresh.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	_, err = New(context.Background(), db, nil)
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "run sqlite.Migrate") {
		t.Fatalf("New before Migrate = %v; want ErrInvalidConfig saying to run Migrate", err)
	}
	for range 2 {
		if err := Migrate(context.Background(), db, nil); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	be, err := New(context.Background(), db, &Options{ReapInterval: -1})
	if err != nil {
		t.Fatalf("New after Migrate: %v", err)
	}
	_ = be.Close()
	for _, o := range []*Options{{QueryTimeout: -1}, {BusyTimeout: -1}, {SettleBatch: -1}} {
		if _, err := New(context.Background(), db, o); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig naming the field", o, err)
		}
	}
}

// TestPublishOverLimitRejected: a body over MaxBatchBytes is refused before it is sent, as a
// permanent refusal.
func TestPublishOverLimitRejected(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	err := checkSize("publish", be.MaxBatchBytes()+1)
	if !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("checkSize over the limit = %v; want ErrRejected", err)
	}
	if err := checkSize("publish", be.MaxBatchBytes()); err != nil {
		t.Fatalf("checkSize at the limit: %v", err)
	}
}

// TestOrderedKeyHeldThenDue: a key's later batches are stored held (delayed) and only its
// first is claimable; acking it makes the next due, in publish order.
func TestOrderedKeyHeldThenDue(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	for _, id := range []string{"k1", "k2", "k3"} {
		if err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: "o", Key: "k", Body: []byte(id), Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, be, "o", "free", 0)
	if d := depth(t, be, "o"); d != (core.Depth{Ready: 2, Delayed: 2}) {
		t.Fatalf("depth = %+v; want 2 ready (k1, free), 2 held", d)
	}
	for _, want := range []string{"k1", "k2", "k3"} {
		var got *core.Claim
		for _, c := range fetch(t, be, 0, all("o")) {
			if c.ID == "free" {
				continue // unkeyed: not held up by the key
			}
			if got != nil {
				t.Fatalf("two batches of key k claimed at once: %s and %s", got.ID, c.ID)
			}
			got = c
		}
		if got == nil || got.ID != want {
			t.Fatalf("claimed %v; want %s", got, want)
		}
		if err := be.Ack(context.Background(), got); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueuesAndInspect: the loose index scan lists every queue with rows and every fetched
// one; InspectBatches pages through a queue in due order.
func TestQueuesAndInspect(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(nil)
	publishN(t, be, "b", 450) // over two pages of 200
	publishN(t, be, "a", 2)
	_ = fetch(t, be, 0, all("c")) // a heartbeat only
	qs, err := be.Queues(context.Background())
	if err != nil || strings.Join(qs, ",") != "a,b,c" {
		t.Fatalf("Queues = %v, %v; want a,b,c", qs, err)
	}
	n := 0
	if err := be.InspectBatches(context.Background(), []string{"b"}, func(core.StoredBatch) bool { n++; return true }); err != nil || n != 450 {
		t.Fatalf("InspectBatches saw %d, %v; want 450", n, err)
	}
}
