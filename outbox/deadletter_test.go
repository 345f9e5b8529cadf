package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

func deadBatch(t *testing.T, queue string, attempt int) *core.DeadLetter {
	t.Helper()
	id := core.NewID()
	body := envelope.Encode(&envelope.Envelope{ID: id, Queue: queue, Attempt: attempt, Created: time.Now(),
		MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{json.RawMessage(`{"n":1}`)}})
	return &core.DeadLetter{Queue: queue, BatchID: id, Body: body, Reason: core.ReasonDeliveryExhausted,
		Error: "listener failed", Attempts: attempt, Messages: 1, At: time.Now()}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	s := e.store
	a := deadBatch(t, "orders", 5)
	b := deadBatch(t, "orders", 5)
	c := deadBatch(t, "strict", 5)
	bad := &core.DeadLetter{Queue: "orders", Body: []byte("not json"), Reason: core.ReasonUndecodable, Error: "undecodable"}
	for _, dl := range []*core.DeadLetter{a, b, c, bad} {
		if err := s.DeadLetter(ctx, dl); err != nil {
			t.Fatal(err)
		}
	}
	// The same batch again while it is dead keeps the first row and says so.
	again := *a
	again.Error, again.Reason, again.Attempts = "failed again", core.ReasonWorkerLost, 6
	if err := s.DeadLetter(ctx, &again); !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("DeadLetter of a batch already dead = %v, want ErrAlreadyDeadLettered", err)
	}
	all, err := s.ListDeadLetters(ctx, outbox.DLQFilter{})
	if err != nil || len(all) != 4 {
		t.Fatalf("ListDeadLetters = %d rows, %v; want 4", len(all), err)
	}
	orders, _ := s.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders"})
	if len(orders) != 3 || orders[0].BatchID != a.BatchID || orders[0].LastError != "listener failed" || !orders[0].Dead() {
		t.Fatalf("orders dead letters = %+v", orders)
	}
	page, _ := s.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders", AfterID: orders[0].ID, Limit: 1})
	if len(page) != 1 || page[0].ID != orders[1].ID {
		t.Fatalf("keyset page = %+v", page)
	}
	got, err := s.GetDeadLetter(ctx, orders[0].ID)
	if err != nil || got.Attempts != 5 || got.Messages != 1 || got.Reason != core.ReasonDeliveryExhausted {
		t.Fatalf("GetDeadLetter = %+v, %v", got, err)
	}
	if _, err := s.GetDeadLetter(ctx, 1<<40); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("GetDeadLetter(missing) = %v, want ErrNotFound", err)
	}

	// Replay resets the attempt count and marks the row replayed.
	if err := s.Replay(ctx, orders[0].ID); err != nil {
		t.Fatal(err)
	}
	pub := e.be.published()
	if len(pub) != 1 || pub[0].ID != a.BatchID || pub[0].Queue != "orders" {
		t.Fatalf("replay published %+v", pub)
	}
	env, err := envelope.Decode(pub[0].Body)
	if err != nil || env.Attempt != 0 || env.Replays != 1 {
		t.Fatalf("replayed envelope = %+v, %v; want attempt 0, replay generation 1", env, err)
	}
	if err := s.Replay(ctx, orders[0].ID); !errors.Is(err, outbox.ErrAlreadyReplayed) {
		t.Fatalf("second Replay = %v, want ErrAlreadyReplayed", err)
	}
	got, _ = s.GetDeadLetter(ctx, orders[0].ID)
	if got.Dead() || got.ReplayCount != 1 {
		t.Fatalf("after replay: %+v", got)
	}
	counts, err := s.DeadLetterCounts(ctx)
	if err != nil || counts["orders"] != 2 || counts["strict"] != 1 {
		t.Fatalf("DeadLetterCounts = %v, %v", counts, err)
	}
	// The original coming back (generation 0) is not a failure of the replay.
	if err := s.DeadLetter(ctx, a); !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("dead letter of the original after its replay = %v, want ErrAlreadyDeadLettered", err)
	}
	if got, _ = s.GetDeadLetter(ctx, orders[0].ID); got.Dead() {
		t.Fatalf("the original coming back made the replayed row dead: %+v", got)
	}
	// The replay failing again makes it dead again, keeping its replay history.
	replayed := *a
	replayed.Replays = 1
	if err := s.DeadLetter(ctx, &replayed); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetDeadLetter(ctx, orders[0].ID)
	if !got.Dead() || got.ReplayCount != 1 {
		t.Fatalf("dead again: %+v", got)
	}

	// An unavailable backend leaves the row dead.
	e.be.setFail(errUnavailable)
	if err := s.Replay(ctx, orders[0].ID); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("Replay with the backend down = %v", err)
	}
	if n, err := s.ReplayQueue(ctx, "orders"); n != 0 || !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("ReplayQueue with the backend down = %d, %v", n, err)
	}
	e.be.setFail(nil)

	// ReplayQueue replays the dead, readable letters of one queue; the unreadable one is reported.
	n, err := s.ReplayQueue(ctx, "orders")
	if n != 2 || err == nil || !errors.Is(err, core.ErrUndecodable) {
		t.Fatalf("ReplayQueue = %d, %v; want 2 and an error about the unreadable batch", n, err)
	}
	if dead, _ := s.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders", State: outbox.DLQDead}); len(dead) != 1 || dead[0].BatchID != "" {
		t.Fatalf("dead orders after ReplayQueue = %+v; want only the unreadable one", dead)
	}
	if _, err := s.ReplayQueue(ctx, ""); err == nil {
		t.Fatal("ReplayQueue without a queue succeeded")
	}

	// Purge.
	if n, err := s.Purge(ctx, outbox.DLQFilter{Queue: "orders", State: outbox.DLQReplayed}); err != nil || n != 2 {
		t.Fatalf("Purge(replayed orders) = %d, %v; want 2", n, err)
	}
	if n, err := s.Purge(ctx, outbox.DLQFilter{Limit: 1}); err != nil || n != 1 {
		t.Fatalf("Purge(limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := s.Purge(ctx, outbox.DLQFilter{}); err != nil || n != 1 {
		t.Fatalf("Purge(all) = %d, %v; want 1", n, err)
	}
	if left, _ := s.ListDeadLetters(ctx, outbox.DLQFilter{}); len(left) != 0 {
		t.Fatalf("%d dead letters left after purging all", len(left))
	}
}

// TestDeadLetterAfterPurgeStartsAtGeneration: a batch replayed twice, its row purged, that
// fails for good again gets a new row whose replay count is its generation, so that once
// replayed again a stale copy of the earlier generation is refused as already dead-lettered
// instead of making the row dead while its replay runs.
func TestDeadLetterAfterPurgeStartsAtGeneration(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	s := e.store
	dl := deadBatch(t, "purged", 5)
	dl.Replays = 2
	if err := s.DeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "purged"})
	if err != nil || len(rows) != 1 || !rows[0].Dead() || rows[0].ReplayCount != 2 {
		t.Fatalf("dead letters = %+v, %v; want one, dead, replay count 2 (its generation)", rows, err)
	}
	if err := s.Replay(ctx, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	pub := e.be.published()
	env, err := envelope.Decode(pub[len(pub)-1].Body)
	if err != nil || env.Replays != 3 {
		t.Fatalf("replayed envelope = %+v, %v; want generation 3", env, err)
	}
	if err := s.DeadLetter(ctx, dl); !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("dead letter of generation 2 after the replay = %v, want ErrAlreadyDeadLettered", err)
	}
	if got, err := s.GetDeadLetter(ctx, rows[0].ID); err != nil || got.Dead() || got.ReplayCount != 3 {
		t.Fatalf("dead letter after a stale copy = %+v, %v; want replayed (count 3), not dead", got, err)
	}
	// A higher generation than the row knows (a copy from before this row) raises the count.
	higher := *dl
	higher.Replays = 5
	if err := s.DeadLetter(ctx, &higher); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetDeadLetter(ctx, rows[0].ID); err != nil || !got.Dead() || got.ReplayCount != 5 {
		t.Fatalf("dead letter of generation 5 = %+v, %v; want dead, replay count 5", got, err)
	}
}

func TestDeadLetterExclusiveFlag(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	dl := deadBatch(t, "solo", 3)
	dl.Exclusive = true
	if err := e.store.DeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	rows, _ := e.store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "solo"})
	if len(rows) != 1 || !rows[0].Exclusive {
		t.Fatalf("rows = %+v; want one marked exclusive", rows)
	}
	if err := e.store.Replay(ctx, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	if pub := e.be.published(); len(pub) != 1 || !pub[0].Exclusive {
		t.Fatalf("replayed %+v; want Exclusive set", pub)
	}
}
