package reaper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// fakeStore holds abandoned batches per queue and hands them out in pages.
type fakeStore struct {
	batch   int
	queues  map[string][]string // queue -> batch ids still stored
	pruned  int64
	pageErr error
}

func (s *fakeStore) PruneIDs(context.Context) (int64, error) { return s.pruned, nil }

func (s *fakeStore) Abandoned(context.Context) ([]Queue, error) {
	var out []Queue
	for q, ids := range s.queues {
		if len(ids) > 0 {
			out = append(out, Queue{Name: q})
		}
	}
	return out, nil
}

func (s *fakeStore) Count(_ context.Context, q string) (int, error) { return len(s.queues[q]), nil }

func (s *fakeStore) Page(_ context.Context, q string, give func(*core.DeadLetter) error) (int, int, error) {
	if s.pageErr != nil {
		return 0, 0, s.pageErr
	}
	ids := s.queues[q]
	page := ids[:min(s.batch, len(ids))]
	given := 0
	for _, id := range page {
		if give(&core.DeadLetter{Queue: q, BatchID: id}) != nil {
			break
		}
		given++
	}
	s.queues[q] = ids[given:]
	return len(page), given, nil
}

// sinkFunc is a dead-letter sink made of a func.
type sinkFunc func(*core.DeadLetter) error

func (f sinkFunc) DeadLetter(_ context.Context, d *core.DeadLetter) error { return f(d) }

func TestReap(t *testing.T) {
	t.Parallel()
	boom := errors.New("sink down")
	for _, tc := range []struct {
		name                 string
		sink                 core.DeadLetterSink
		wantReaped, wantLeft int
	}{
		{"no sink leaves them, counted", nil, 0, 5},
		{"a sink takes every page", sinkFunc(func(*core.DeadLetter) error { return nil }), 5, 0},
		{"already dead-lettered counts as taken", sinkFunc(func(*core.DeadLetter) error { return core.ErrAlreadyDeadLettered }), 5, 0},
		{"a failing sink stops the queue, the rest counted", sinkFunc(func(d *core.DeadLetter) error {
			if d.BatchID == "b3" {
				return boom
			}
			return nil
		}), 3, 2},
		{"a panicking sink is a failure", sinkFunc(func(*core.DeadLetter) error { panic("no") }), 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{batch: 2, pruned: 7, queues: map[string][]string{"q": {"b0", "b1", "b2", "b3", "b4"}}}
			r := &Reaper{Name: "test", Store: st, Sink: tc.sink, AbandonedAfter: time.Hour, Batch: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			res, err := r.Reap(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Reaped != tc.wantReaped || res.LeftInPlace != tc.wantLeft || res.ExpiredIDs != 7 || len(res.Queues) != 1 {
				t.Fatalf("Reap = %+v; want reaped %d, left %d", res, tc.wantReaped, tc.wantLeft)
			}
			if s := r.Stats(); s.Reaped != int64(tc.wantReaped) || s.Abandoned != int64(tc.wantLeft) || s.ReapRuns != 1 {
				t.Fatalf("Stats = %+v", s)
			}
		})
	}
}

func TestReapStoreError(t *testing.T) {
	t.Parallel()
	down := errors.New("db down")
	st := &fakeStore{batch: 2, queues: map[string][]string{"q": {"b0"}}, pageErr: down}
	r := &Reaper{Name: "test", Store: st, Sink: sinkFunc(func(*core.DeadLetter) error { return nil }), Batch: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := r.Reap(context.Background()); !errors.Is(err, down) {
		t.Fatalf("Reap = %v; want the store's error", err)
	}
}

func TestDeadLetterNamesTheQueue(t *testing.T) {
	t.Parallel()
	r := &Reaper{Name: "mysql", AbandonedAfter: time.Hour}
	d := r.DeadLetter("q", "b", []byte("x"), 3, 2)
	if d.Reason != core.ReasonAbandoned || d.Attempts != 3 || d.Messages != 2 || d.Error != `mysql: no node fetched queue "q" for 1h0m0s` || d.At.IsZero() {
		t.Fatalf("DeadLetter = %+v", d)
	}
}
