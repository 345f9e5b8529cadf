package txmq

import "github.com/txmq/txmq/internal/testhooks"

// The test-only controls (crash, freeze) are unexported methods of Node; txmqtest reaches them
// through internal/testhooks.
func init() {
	testhooks.Halt = func(n any) { n.(*Node).halt() }
	testhooks.Freeze = func(n any) { n.(*Node).freeze() }
	testhooks.Thaw = func(n any) { n.(*Node).thaw() }
}
