package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the queues the new backend and the old ones know, together (core.QueueLister):
// a queue is listed when any of them lists it. A backend that cannot list its queues
// (core.ErrListUnsupported) adds none; when none of them can, the error wraps
// core.ErrListUnsupported. Any other error of one backend is returned, naming it.
func (d *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := d.usable("queues"); err != nil {
		return nil, err
	}
	var out []string
	listed := false
	add := func(name string, b core.Backend) error {
		qs, err := core.ListQueues(ctx, b)
		switch {
		case errors.Is(err, core.ErrListUnsupported):
			return nil
		case err != nil:
			return fmt.Errorf("txmq drain: queues of %s: %w", name, err)
		}
		listed = true
		out = append(out, qs...)
		return nil
	}
	if err := add("the new backend", d.primary); err != nil {
		return nil, err
	}
	for _, o := range d.olds {
		if !o.acquire() {
			continue
		}
		if err := add("old backend "+o.name, o.b); err != nil {
			return nil, err
		}
	}
	if !listed {
		return nil, fmt.Errorf("%w: txmq drain: neither the new backend nor an old one can list its queues", core.ErrListUnsupported)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
