// Package testhooks carries the engine's test-only controls from package txmq, which sets them
// in an init func, to package txmqtest, which is the only place tests (the parity suite
// included) reach them: txmqtest.Halt, txmqtest.Freeze and txmqtest.Thaw. They are not methods
// of txmq.Node, so an app never sees them.
//
// The node is passed as any because package txmq imports this package: each func asserts a
// *txmq.Node.
package testhooks

// The controls; nil until package txmq is initialised (it always is when txmqtest is linked,
// since txmqtest imports it).
var (
	// Halt stops a node at once as if its process died (see txmqtest.Halt).
	Halt func(node any)
	// Freeze stops a node's fetching and lease extensions as if its process were paused (see
	// txmqtest.Freeze).
	Freeze func(node any)
	// Thaw ends a Freeze.
	Thaw func(node any)
)

// Engine returns a node's engine (an *engine.Engine), for the engine's own tests, which
// drive it through the app API.
var Engine func(node any) any
