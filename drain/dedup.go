package drain

import "github.com/txmq/txmq/core"

// DedupIDs implements core.IDDeduper as the primary does: publishes go to the primary only,
// so caller ids deduplicate there. Ids published to an old backend before the switch are not
// known to the primary: a repeat of one within its window is accepted once more.
func (d *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupsIDs(d.primary) }
