package drain_test

import (
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/parity"
	"github.com/txmq/txmq/txmqtest"
)

// harness runs the parity suite on a drain backend: a memory primary and one old memory
// backend with nothing in it, so the wrapper must mean exactly what a plain backend means.
type harness struct{}

func (harness) Name() string { return "drain" }

func (harness) Capabilities() parity.Caps { return parity.Caps{} }

func (harness) Open(t *testing.T) parity.Env {
	primary, old := memory.New(nil), memory.New(nil)
	t.Cleanup(func() { _ = primary.Close(); _ = old.Close() })
	return env{primary: primary, old: old}
}

// env shares one primary and one old memory backend among its clients; each client is its
// own drain wrapper, as each process runs its own.
type env struct{ primary, old *memory.Backend }

func (e env) Backend(t *testing.T) core.Backend {
	d := drain.New(&counting{Backend: e.primary}, []core.Backend{&counting{Backend: e.old}},
		&drain.Options{Logger: txmqtest.DiscardLogger(), CheckInterval: 2 * time.Second})
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e env) Break(*testing.T)   { e.primary.Break(); e.old.Break() }
func (e env) Restore(*testing.T) { e.primary.Restore(); e.old.Restore() }

func TestParity(t *testing.T) { parity.Run(t, harness{}) }
