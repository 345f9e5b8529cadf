package txmq

import (
	"fmt"

	"github.com/txmq/txmq/core"
)

// checkLimitConfig validates a queue's ClusterLimit and KeyLimit against its other settings.
func checkLimitConfig(name string, exclusive, fair bool, clusterLimit, keyLimit int) error {
	switch {
	case clusterLimit < 0:
		return fmt.Errorf("%w: queue %q: ClusterLimit is %d; use a number of batches > 0, or 0 for no cluster-wide limit", core.ErrInvalidConfig, name, clusterLimit)
	case keyLimit < 0:
		return fmt.Errorf("%w: queue %q: KeyLimit is %d; use a number of batches > 0, or 0 for no limit per key", core.ErrInvalidConfig, name, keyLimit)
	case exclusive && clusterLimit > 0:
		return fmt.Errorf("%w: queue %q: Exclusive and ClusterLimit %d cannot be combined: Exclusive already means one batch in flight cluster-wide (ClusterLimit 1); drop one of them", core.ErrInvalidConfig, name, clusterLimit)
	case exclusive && keyLimit > 0:
		return fmt.Errorf("%w: queue %q: Exclusive and KeyLimit %d cannot be combined: Exclusive already allows one batch in flight cluster-wide, whatever its key; drop one of them", core.ErrInvalidConfig, name, keyLimit)
	case keyLimit > 0 && !fair:
		return fmt.Errorf("%w: queue %q: KeyLimit %d needs Fair: true, which gives each batch the fairness key the limit counts by (FairKey, else the ordering key); declare the queue Fair, or use ClusterLimit for one limit over all keys", core.ErrInvalidConfig, name, keyLimit)
	}
	return nil
}
