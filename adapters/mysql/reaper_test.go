package mysql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// age makes every batch of queue look created d ago.
func (w *world) age(queue string, d time.Duration) {
	w.t.Helper()
	_, err := w.admin.Exec(`UPDATE `+qualifier(w.schema)+`txmq_jobs SET created_at = created_at - ? WHERE queue = ?`, micros(d), queue)
	if err != nil {
		w.t.Fatal(err)
	}
}

// TestReaperDeadLettersAbandonedQueues: the reaper hands the old batches of queues no node
// fetched to the sink, in pages, and deletes them; a fetched or young queue is left alone;
// an abandoned ordered key's next batch becomes due; without a sink nothing is deleted.
func TestReaperDeadLettersAbandonedQueues(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	s := &txmqtest.DeadLetterRecorder{}
	be := w.backend(&Options{DeadLetters: s, ReapBatch: 3})
	publishN(t, be, "gone", 7)  // never fetched by anyone, old
	publishN(t, be, "live", 2)  // old, but fetched recently
	publishN(t, be, "young", 2) // never fetched, but young
	w.age("gone", 8*24*time.Hour)
	w.age("live", 8*24*time.Hour)
	if cs := fetch(t, be, 0, core.QueueSlots{Queue: "live", Free: 1}); len(cs) != 1 { // heartbeat
		t.Fatal("no claim")
	}
	res, err := be.Reap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Reaped != 7 || res.LeftInPlace != 0 || len(res.Queues) != 2 { // gone and young are unfetched
		t.Fatalf("reap = %+v", res)
	}
	if s.Count("") != 7 {
		t.Fatalf("sink got %d", s.Count(""))
	}
	dl := s.Letters()[0]
	if dl.Queue != "gone" || dl.Reason != ReasonAbandoned || len(dl.Body) == 0 || dl.Messages != 1 || dl.BatchID == "" {
		t.Fatalf("dead letter = %+v", dl)
	}
	for q, want := range map[string]core.Depth{"gone": {}, "live": {Ready: 1, InFlight: 1}, "young": {Ready: 2}} {
		if d := depth(t, be, q); d != want {
			t.Fatalf("%s depth = %+v, want %+v", q, d, want)
		}
	}

	// Without a sink (or with a failing one) the batches stay, counted.
	publishN(t, be, "kept", 2)
	w.age("kept", 8*24*time.Hour)
	s.Fail = errors.New("sink down")
	res, err = be.Reap(context.Background())
	if err != nil || res.LeftInPlace != 2 || res.Reaped != 0 {
		t.Fatalf("reap with a failing sink = %+v, %v", res, err)
	}
	if d := depth(t, be, "kept"); d.Ready != 2 {
		t.Fatalf("kept depth = %+v", d)
	}
	if st := be.Stats(); st.Reaped != 7 || st.Abandoned != 2 || st.ReapRuns != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestReaperPromotesAbandonedKeys: reaping the first batch of an ordering key makes the next
// one due (the reaper takes the held ones too, in later pages).
func TestReaperPromotesAbandonedKeys(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	s := &txmqtest.DeadLetterRecorder{}
	be := w.backend(&Options{DeadLetters: s, ReapBatch: 1})
	for _, id := range []string{"a", "b"} {
		if err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: "ord", Key: "k", Body: []byte(id), Messages: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if d := depth(t, be, "ord"); d != (core.Depth{Ready: 1, Delayed: 1}) {
		t.Fatalf("depth = %+v", d)
	}
	w.age("ord", 8*24*time.Hour)
	res, err := be.Reap(context.Background())
	if err != nil || res.Reaped != 2 {
		t.Fatalf("reap = %+v, %v", res, err)
	}
	if got := s.Letters(); got[0].BatchID != "a" || got[1].BatchID != "b" {
		t.Fatalf("dead letters %s, %s; want a then b", got[0].BatchID, got[1].BatchID)
	}
	if held, err := be.HoldsKey(context.Background(), "ord", "k"); err != nil || held {
		t.Fatalf("HoldsKey = %v, %v; want false", held, err)
	}
}

// TestExpiredIDsPruned: Reap deletes the dedup ids whose window passed, and only those.
func TestExpiredIDsPruned(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(&Options{ReapBatch: 2})
	pub := func(id string, window time.Duration) error {
		return be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: "q", Body: []byte(id), Messages: 1, DedupWindow: window, DedupIDs: []string{id}})
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := pub(id, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub("d", time.Hour); err != nil {
		t.Fatal(err)
	}
	// The windows of a, b and c passed an hour ago.
	if _, err := w.admin.Exec(`UPDATE ` + qualifier(w.schema) + `txmq_job_ids SET expires_at = expires_at - 3600000000 WHERE id IN ('a', 'b', 'c')`); err != nil {
		t.Fatal(err)
	}
	res, err := be.Reap(context.Background())
	if err != nil || res.ExpiredIDs != 3 {
		t.Fatalf("reap = %+v, %v; want 3 expired ids", res, err)
	}
	var dup *core.DuplicateError
	if err := pub("d", time.Hour); !errors.As(err, &dup) || dup.IDs[0] != "d" {
		t.Fatalf("republish of a held id = %v; want a DuplicateError naming d", err)
	}
	if err := pub("a", time.Hour); err != nil {
		t.Fatalf("republish of an expired id = %v", err)
	}
}
