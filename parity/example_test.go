package parity_test

import (
	"testing"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// harness is what an adapter's parity_test.go supplies; this one is the memory adapter's.
// A server-backed adapter opens a fresh namespace per property (a key prefix, a schema) and
// breaks it with a TCP proxy per Env.
type harness struct{}

func (harness) Name() string { return "memory" }

// Capabilities: memory has no native delay or size cap, and the defaults' timing suits it.
func (harness) Capabilities() parity.Caps { return parity.Caps{} }

// Open gives each property its own backend, closed when the property ends.
func (harness) Open(t *testing.T) parity.Env {
	be := memory.New(nil)
	t.Cleanup(func() { _ = be.Close() })
	return env{be}
}

// env is one isolated namespace: here one *memory.Backend, which every node shares.
type env struct{ be *memory.Backend }

func (e env) Backend(*testing.T) core.Backend { return e.be }
func (e env) Break(*testing.T)                { e.be.Break() }
func (e env) Restore(*testing.T)              { e.be.Restore() }

// An adapter runs the whole suite from one test in its package, next to the harness above:
//
//	func TestParity(t *testing.T) { parity.Run(t, harness{}) }
//
// Run needs that test's *testing.T, which an example does not get, so this example has no
// output and is not run; go test compiles it.
func ExampleRun() {
	testParity := func(t *testing.T) { // in the adapter's package: func TestParity(t *testing.T)
		parity.Run(t, harness{})
	}
	_ = testParity
}
