package sqs

import (
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// TestParity runs the whole conformance suite against the SQS emulator, with a 2 s native
// delay cap (the suite then publishes delays beyond it) and a 2 s lease (SQS visibility is
// whole seconds).
func TestParity(t *testing.T) { parity.Run(t, harness{}) }

type harness struct{}

func (harness) Name() string { return "sqs" }

func (harness) Capabilities() parity.Caps {
	return parity.Caps{
		MaxNativeDelay: testCap,
		MaxMessageSize: DefaultMaxMessageBytes,
		Lease:          2 * time.Second,
		PollWait:       time.Second,
		// SQS delays are whole seconds, rounded up so that nothing is early: a delayed batch
		// can be up to a second late by design, on top of a poll. The default 2 s left ~150 ms
		// of room on a loaded CI machine.
		DueTolerance: 3 * time.Second,
	}
}

func (harness) Open(t *testing.T) parity.Env { return &env{s: newSpace(t)} }

// env is one property's namespace: its own prefix, overflow directory and proxy, shared by
// every client the property opens.
type env struct{ s *space }

func (e *env) Backend(t *testing.T) core.Backend { return e.s.client(t, nil) }
func (e *env) Break(t *testing.T)                { e.s.proxy.Break() }
func (e *env) Restore(t *testing.T)              { e.s.proxy.Restore() }
