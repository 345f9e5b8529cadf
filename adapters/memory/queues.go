package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the queues this backend has state for: every queue a batch was published to or
// fetched from since New, sorted (core.QueueLister).
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: queues: %w", err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("queues", ""); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(be.queues))
	for name := range be.queues {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}
