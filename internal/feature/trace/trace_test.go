package trace_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/internal/feature/trace"
)

// panicky is a Tracer whose every call panics, the end func of a run included.
type panicky struct{ inStartRun bool }

func (panicky) StartPublish(context.Context, string, int) map[string]string { panic("publish") }

func (p panicky) StartRun(ctx context.Context, _, _ string, _, _ int, _ map[string]string, _ []envelope.TraceCount) (context.Context, func(error)) {
	if p.inStartRun {
		panic("run")
	}
	return ctx, func(error) { panic("end") }
}

type noSpecs struct{}

func (noSpecs) Lookup(string) *engine.Spec { return nil }
func (noSpecs) Names() []string            { return nil }

func attached(t *testing.T, tr *trace.Tracing) {
	t.Helper()
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	e, err := engine.New(be, engine.Options{Specs: noSpecs{}, Features: []any{tr},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
}

// TestTracerPanicsAreContained: a Tracer that panics is logged and the publish or run goes on
// without it, whichever of its calls panics.
func TestTracerPanicsAreContained(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tr   panicky
	}{{"in StartRun", panicky{inStartRun: true}}, {"in the end func", panicky{}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := trace.New(tc.tr, nil, nil)
			attached(t, tr)
			ctx := context.Background()
			if got := tr.TracePublish(ctx, "q", 1); got != nil {
				t.Fatalf("trace context %v from a panicking StartPublish", got)
			}
			out, end := tr.TraceRun(ctx, "q", 1, &engine.Batch{Header: &envelope.Header{ID: "b"}, Count: 1})
			if out == nil || end == nil {
				t.Fatalf("TraceRun gave ctx %v, end func set %v", out, end != nil)
			}
			end(nil) // must not panic
		})
	}
}

// TestNoTracingWithoutFuncs: with no Tracer and no inject or extract func there is no feature.
func TestNoTracingWithoutFuncs(t *testing.T) {
	t.Parallel()
	if tr := trace.New(nil, nil, nil); tr != nil {
		t.Fatalf("trace.New(nil, nil, nil) = %v, want nil", tr)
	}
}
