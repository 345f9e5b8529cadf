package txmq

import "github.com/txmq/txmq/internal/testhooks"

// The test-only controls (crash, freeze) are the engine's, not Node's; txmqtest reaches them
// through internal/testhooks, and the engine's own tests reach the engine of a node there.
func init() {
	testhooks.Halt = func(n any) { n.(*Node).eng.Halt() }
	testhooks.Freeze = func(n any) { n.(*Node).eng.Freeze() }
	testhooks.Thaw = func(n any) { n.(*Node).eng.Thaw() }
	testhooks.Engine = func(n any) any { return n.(*Node).eng }
}
