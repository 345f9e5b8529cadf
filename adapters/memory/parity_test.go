package memory_test

import (
	"testing"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// harness runs the parity suite on a fresh memory Backend per property.
type harness struct{}

func (harness) Name() string { return "memory" }

func (harness) Capabilities() parity.Caps { return parity.Caps{} }

func (harness) Open(t *testing.T) parity.Env {
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	return env{be}
}

// env is one memory Backend: every client is the same *Backend, as nodes of one process
// share it.
type env struct{ be *memory.Backend }

func (e env) Backend(*testing.T) core.Backend { return e.be }
func (e env) Break(*testing.T)                { e.be.Break() }
func (e env) Restore(*testing.T)              { e.be.Restore() }

func TestParity(t *testing.T) { parity.Run(t, harness{}) }
