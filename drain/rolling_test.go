package drain_test

import (
	"testing"
	"time"

	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/drain/draintest"
)

// TestRollingDeployOldPublisherAfterDrained: memory to memory, with short intervals.
func TestRollingDeployOldPublisherAfterDrained(t *testing.T) {
	t.Parallel()
	primary, old := newMemory(t), newMemory(t)
	draintest.RollingDeploy(t, &counting{Backend: primary}, &counting{Backend: old}, old, drain.Options{
		CheckInterval: 50 * time.Millisecond, RecheckInterval: 200 * time.Millisecond,
	})
}
