package sqljobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// age makes every batch of queue look created d ago.
func (w *world) age(queue string, d time.Duration) {
	w.t.Helper()
	_, err := w.admin.Exec(context.Background(), `UPDATE `+pgx.Identifier{w.schema}.Sanitize()+`.txmq_jobs SET created_at = now() - $2::bigint * interval '1 microsecond' WHERE queue = $1`, queue, micros(d))
	if err != nil {
		w.t.Fatal(err)
	}
}

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
	res, err := be.Reap(ctxT(t))
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
	if st := be.Stats(); st.Reaped != 7 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestReaperWithoutSinkLeavesBatches(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	be := w.backend(nil)
	publishN(t, be, "gone", 4)
	w.age("gone", 8*24*time.Hour)
	res, err := be.Reap(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reaped != 0 || res.LeftInPlace != 4 {
		t.Fatalf("reap = %+v", res)
	}
	if d := depth(t, be, "gone"); d.Ready != 4 {
		t.Fatalf("batches deleted without a sink: %+v", d)
	}
	if st := be.Stats(); st.Abandoned != 4 {
		t.Fatalf("stats = %+v", st)
	}
	// A failing sink leaves them too.
	s := &txmqtest.DeadLetterRecorder{Fail: errors.New("sink down")}
	be2 := w.backend(&Options{DeadLetters: s})
	res, err = be2.Reap(ctxT(t))
	if err != nil || res.Reaped != 0 || res.LeftInPlace != 4 {
		t.Fatalf("reap with a failing sink = %+v, %v", res, err)
	}
	if d := depth(t, be, "gone"); d.Ready != 4 {
		t.Fatalf("batches deleted although the sink failed: %+v", d)
	}
}

// TestReaperRunsOnFirstTick: the reaper runs when the Backend is made, not one period later.
func TestReaperRunsOnFirstTick(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	seed := w.backend(nil)
	publishN(t, seed, "gone", 2)
	w.age("gone", 8*24*time.Hour)
	s := &txmqtest.DeadLetterRecorder{}
	w.backend(&Options{DeadLetters: s, ReapInterval: time.Hour})
	txmqtest.Eventually(t, 10*time.Second, func() bool { return s.Count("") == 2 }, "the reaper's first run dead-letters the abandoned batches")
}
