package pause_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/feature/pause"
)

// source is a PauseSource whose answer the test sets.
type source struct {
	mu     sync.Mutex
	paused []string
	err    error
}

func (s *source) Paused(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused, s.err
}

func (s *source) set(paused []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused, s.err = paused, err
}

// noSpecs declares no queue.
type noSpecs struct{}

func (noSpecs) Lookup(string) *engine.Spec { return nil }
func (noSpecs) Names() []string            { return nil }

// TestGateHoldsWhatTheSourceSays: the gate holds the queues its source lists from its first
// read on, follows each later read, and keeps the last known set when a read fails (a
// database that does not answer resumes nothing).
func TestGateHoldsWhatTheSourceSays(t *testing.T) {
	t.Parallel()
	src := &source{paused: []string{"a"}}
	g := pause.New(src, time.Hour)
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	e, err := engine.New(be, engine.Options{Specs: noSpecs{}, Features: []any{g},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx := context.Background()
	for _, step := range []struct {
		name         string
		paused       []string
		err          error
		heldA, heldB bool
	}{
		{"first read", []string{"a"}, nil, true, false},
		{"a resumed, b paused", []string{"b"}, nil, false, true},
		{"read fails: last set kept", nil, errors.New("database down"), false, true},
		{"all resumed", nil, nil, false, false},
	} {
		src.set(step.paused, step.err)
		g.Prepare(ctx)
		if g.Held("a") != step.heldA || g.Held("b") != step.heldB {
			t.Fatalf("%s: held a=%v b=%v, want a=%v b=%v", step.name, g.Held("a"), g.Held("b"), step.heldA, step.heldB)
		}
	}
}
