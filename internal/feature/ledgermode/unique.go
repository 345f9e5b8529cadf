package ledgermode

import (
	"context"
	"errors"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// forgetter is a Keeper that can forget a kept batch the backend stored nothing for (package
// ledger's *Ledger).
type forgetter interface {
	ForgetBatch(ctx context.Context, queue, id string) error
}

// WrapPublish implements engine.PublishWrapper: a unique batch the backend refused because
// another batch holds its key (core.UniqueError) was kept by BeforeWrite but stored nowhere,
// so its copy is forgotten (else the republisher would publish it again once the key is free);
// the error goes on unchanged to the unique feature, which counts and logs it.
func (c *Copies) WrapPublish(next engine.PublishFunc) engine.PublishFunc {
	return func(ctx context.Context, b core.OutgoingBatch) (core.OutgoingBatch, error) {
		sb, err := next(ctx, b)
		if err == nil || b.Unique.Mode == 0 || !c.k.Mode() {
			return sb, err
		}
		f, ok := c.k.(forgetter)
		if _, held := errors.AsType[*core.UniqueError](err); !held || !ok {
			return sb, err
		}
		if ferr := f.ForgetBatch(context.WithoutCancel(ctx), b.Queue, b.ID); ferr != nil {
			c.e.Logger().Warn("txmq: ledger mode keeps a unique batch that was left out; the republisher finds its key held and forgets it later", "queue", b.Queue, "batch", b.ID, "error", ferr)
		}
		return sb, err
	}
}
