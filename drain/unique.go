package drain

import "github.com/txmq/txmq/core"

// KeepsUnique implements core.UniqueKeeper as the primary does: publishes go to the primary
// only, so unique keys are checked and held there. A key held by a batch still on an old
// backend (published before the switch) is not known to the primary: while the old backends
// drain, one more publish of such a key may be stored (and, for UniqueDebounce, the old batch
// is not replaced). Once the old backends are empty every mode holds as on the primary.
func (d *Backend) KeepsUnique(m core.UniqueMode) error { return core.KeepsUnique(d.primary, m) }
