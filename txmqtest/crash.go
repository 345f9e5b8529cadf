package txmqtest

import (
	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/testhooks"
)

// Halt stops n at once as if its process died, for crash tests: no settle, no lease
// extension, no drain; its buffered messages are lost and the batches it claimed come back
// after their leases expire (on another node, or on a new one). A halted node cannot be
// started again; Close on it returns at once. Never needed in an app.
func Halt(n *txmq.Node) { testhooks.Halt(n) }

// Freeze simulates a paused process (a long GC pause, SIGSTOP, an overloaded VM), for fault
// tests: n stops fetching and extending leases until Thaw, while its running listeners go on.
// Its fence timers still run, so a claim not confirmed extended before LeaseUntil -
// txmq.LeaseMargin(lease) is cancelled with txmq.ErrLeaseLost and never settled. Never needed
// in an app.
func Freeze(n *txmq.Node) { testhooks.Freeze(n) }

// Thaw ends a Freeze: n fetches and extends leases again.
func Thaw(n *txmq.Node) { testhooks.Thaw(n) }
