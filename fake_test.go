package txmq

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/fakes"
)

// The shared fakes (package fakes), under the names these tests use.
type (
	fakeBackend = fakes.Backend
	fakeSink    = fakes.Sink
	fakeTx      = fakes.Tx
	// handoffRecorder records what is handed to the outbox.
	handoffRecorder = fakes.Handoff
)

func quietLogger() *slog.Logger { return fakes.QuietLogger() }

// newTestNode returns an unstarted node on a fake backend with a fresh registry.
func newTestNode(t *testing.T, opts *NodeOptions) (*Node, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	return newTestNodeOn(t, fb, opts), fb
}

// newTestNodeOn returns an unstarted node on backend with a fresh registry.
func newTestNodeOn(t *testing.T, backend core.Backend, opts *NodeOptions) *Node {
	t.Helper()
	o := NodeOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = NewRegistry()
	}
	o.Logger = quietLogger()
	n, err := NewNode(backend, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// rejectsDecode encodes fine but never decodes back.
type rejectsDecode struct{ V int }

func (r *rejectsDecode) UnmarshalJSON([]byte) error { return errors.New("no way back") }
