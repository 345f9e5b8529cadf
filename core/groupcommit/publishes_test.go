package groupcommit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestPublishesRound runs rounds directly: a lone batch goes by the one-row statement, more by
// one statement; a round refused for a value stores each batch alone, each with its own
// outcome; any other failure is the round's.
func TestPublishesRound(t *testing.T) {
	t.Parallel()
	errBad := errors.New("value refused")
	errDown := errors.New("database down")
	tests := []struct {
		name      string
		ids       []string
		manyErr   error
		wantCalls string // the statements run, in order: one(id) or many(ids)
		wantErr   error
		wantOwn   []error // each batch's own outcome (Err)
	}{
		{name: "lone", ids: []string{"a"}, wantCalls: "one(a)", wantOwn: []error{nil}},
		{name: "grouped", ids: []string{"a", "b", "c"}, wantCalls: "many(a,b,c)", wantOwn: []error{nil, nil, nil}},
		{name: "refused value", ids: []string{"a", "bad", "c"}, manyErr: errBad, wantCalls: "many(a,bad,c) one(a) one(bad) one(c)", wantOwn: []error{nil, errBad, nil}},
		{name: "down", ids: []string{"a", "b"}, manyErr: errDown, wantCalls: "many(a,b)", wantErr: errDown, wantOwn: []error{nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls []string
			ps := NewPublishes(0, 10, PublishStore{
				One: func(_ context.Context, p *Publish) error {
					calls = append(calls, "one("+p.Batch.ID+")")
					if p.Batch.ID == "bad" {
						return errBad
					}
					return nil
				},
				Many: func(_ context.Context, reqs []*Publish) error {
					ids := make([]string, len(reqs))
					for i, p := range reqs {
						ids[i] = p.Batch.ID
					}
					calls = append(calls, "many("+strings.Join(ids, ",")+")")
					return tt.manyErr
				},
				Attempt:  func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) },
				Rejected: func(err error) bool { return errors.Is(err, errBad) },
			})
			reqs := make([]*Publish, len(tt.ids))
			for i, id := range tt.ids {
				reqs[i] = &Publish{Batch: core.OutgoingBatch{ID: id, Queue: "q"}, Body: []byte("{}")}
			}
			if err := ps.Run(context.Background(), reqs); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			}
			if got := strings.Join(calls, " "); got != tt.wantCalls {
				t.Errorf("statements %q, want %q", got, tt.wantCalls)
			}
			for i, p := range reqs {
				if !errors.Is(p.Err(), tt.wantOwn[i]) || (p.Err() == nil) != (tt.wantOwn[i] == nil) {
					t.Errorf("batch %s: own outcome %v, want %v", p.Batch.ID, p.Err(), tt.wantOwn[i])
				}
			}
		})
	}
}

// TestPublishesDo: a publish through the group returns its own outcome.
func TestPublishesDo(t *testing.T) {
	t.Parallel()
	ps := NewPublishes(0, 10, PublishStore{
		One:      func(context.Context, *Publish) error { return nil },
		Many:     func(context.Context, []*Publish) error { return nil },
		Attempt:  func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) },
		Rejected: func(error) bool { return false },
	})
	if err := ps.Do(context.Background(), core.OutgoingBatch{ID: "x", Queue: "q"}, []byte("{}"), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ps.Do(ctx, core.OutgoingBatch{ID: "y", Queue: "q"}, []byte("{}"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a publish whose caller gave up = %v, want context.Canceled", err)
	}
}
