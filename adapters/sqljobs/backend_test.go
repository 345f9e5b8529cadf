package sqljobs

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestPublishFetchAck(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	publish(t, be, "q", "b1", time.Time{})
	cs := fetch(t, be, 0, all("q"))
	if len(cs) != 1 {
		t.Fatalf("got %d claims, want 1", len(cs))
	}
	c := cs[0]
	if c.Queue != "q" || c.ID != "b1" || !bytes.Equal(c.Body, []byte("body-b1")) || c.Deliveries != 1 {
		t.Fatalf("claim = %+v", c)
	}
	if until := time.Until(c.LeaseUntil); until < 8*time.Second || until > 12*time.Second {
		t.Fatalf("LeaseUntil in %v, want about 10s", until)
	}
	if d := depth(t, be, "q"); d != (core.Depth{InFlight: 1}) {
		t.Fatalf("depth while claimed = %+v", d)
	}
	if cs := fetch(t, be, 0, all("q")); len(cs) != 0 {
		t.Fatalf("claimed batch handed out again: %d", len(cs))
	}
	if err := be.Ack(ctxT(t), c); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := be.Ack(ctxT(t), c); err != nil {
		t.Fatalf("second ack must be a no-op, got %v", err)
	}
	if err := be.Drop(ctxT(t), c, core.ReasonDeliveryExhausted); err != nil {
		t.Fatalf("drop after ack must be a no-op, got %v", err)
	}
	if d := depth(t, be, "q"); d != (core.Depth{}) {
		t.Fatalf("depth after ack = %+v", d)
	}
}

func TestNewNeedsMigration(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, err := New(ctxT(t), w.admin, &Options{Schema: w.schema + "_none"})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New on an unmigrated schema: %v, want ErrInvalidConfig", err)
	}
	if err := Migrate(ctxT(t), w.admin, &Options{Schema: w.schema}); err != nil {
		t.Fatalf("second Migrate must be a no-op: %v", err)
	}
	if _, err := New(ctxT(t), w.admin, &Options{Schema: "bad schema"}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("bad schema: %v", err)
	}
}

func TestClosedBackend(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	_ = be.Close()
	if err := be.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: "x", Queue: "q"})
	if !errors.Is(err, core.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, err := be.Fetch(context.Background(), core.FetchRequest{Queues: []core.QueueSlots{all("q")}}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("fetch after close: %v", err)
	}
}
