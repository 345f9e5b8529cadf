package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestNewNeedsMigrate: New on a database without the jobs tables says to run Migrate; Migrate
// twice is a no-op; bad options name the field.
func TestNewNeedsMigrate(t *testing.T) {
	t.Parallel()
	u := mysqlURL(t)
	db := dbAt(t, u, "")
	schema := testenv.UniqueName("txmq_t_")
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS " + quoteIdent(schema)) })
	if _, err := db.Exec("CREATE DATABASE " + quoteIdent(schema)); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), db, &Options{Schema: schema})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "run mysql.Migrate") {
		t.Fatalf("New before Migrate = %v; want ErrInvalidConfig saying to run Migrate", err)
	}
	for range 2 {
		if err := Migrate(context.Background(), db, &Options{Schema: schema}); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	be, err := New(context.Background(), db, &Options{Schema: schema, ReapInterval: -1})
	if err != nil {
		t.Fatalf("New after Migrate: %v", err)
	}
	_ = be.Close()
	for _, o := range []*Options{{Schema: "no-dashes"}, {QueryTimeout: -1}, {SettleBatch: -1}} {
		if _, err := New(context.Background(), db, o); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig naming the field", o, err)
		}
	}
}

// TestPublishOverPacketRejected: a body over MaxBatchBytes (the server's max_allowed_packet
// less room) is refused before it is sent, as a permanent refusal, and the Backend still
// works.
func TestPublishOverPacketRejected(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	if be.MaxBatchBytes() < 1<<20 {
		t.Fatalf("MaxBatchBytes = %d; want the server's max_allowed_packet less 64 KiB", be.MaxBatchBytes())
	}
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: "big", Queue: "q", Body: make([]byte, be.MaxBatchBytes()+1)})
	if !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("Publish over the limit = %v; want ErrRejected", err)
	}
	if err := be.Publish(context.Background(), core.OutgoingBatch{ID: "fits", Queue: "q", Body: make([]byte, be.MaxBatchBytes())}); err != nil {
		t.Fatalf("Publish at the limit: %v", err)
	}
	cs := fetch(t, be, 0, all("q"))
	if len(cs) != 1 || len(cs[0].Body) != be.MaxBatchBytes() {
		t.Fatalf("fetched %d claims", len(cs))
	}
}

// TestOrderedKeyHeldThenDue: a key's later batches are stored held (delayed) and only its
// first is claimable; acking it makes the next due, in publish order.
func TestOrderedKeyHeldThenDue(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
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
