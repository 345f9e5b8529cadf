package drain

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
)

// usable returns the error of a call made after Close: one wrapping core.ErrClosed, whatever
// the wrapped backends (which a test or an app may share with other wrappers) still accept.
func (d *Backend) usable(op string) error {
	if d.closed.Load() {
		return fmt.Errorf("txmq drain: %s: the backend was closed; open a new one: %w", op, core.ErrClosed)
	}
	return nil
}

// closing returns ctx cancelled also by Close, so that a Fetch waiting on the primary or an
// old backend ends when the wrapper is closed.
func (d *Backend) closing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.closeCtx, cancel)
	return ctx, func() { stop(); cancel() }
}
