package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

var _ core.Splitter = (*Backend)(nil)

// errSplitLost rolls back a Split whose claim's lease no longer held.
var errSplitLost = errors.New("sqljobs: split: lease not held")

// Split settles a claim whose batch the engine split by per-message outcomes, in one
// transaction: the claim's row is deleted (with its Exclusive lock) under its live lease and
// each part inserted as a new batch of the queue, due after its Delay on the database's clock.
// A lease that no longer holds rolls everything back and returns an error wrapping
// core.ErrLeaseLost. Parts are unkeyed batches of the claim's queue (an ordered batch keeps its
// key's head through Retry instead).
func (be *Backend) Split(ctx context.Context, c *core.Claim, parts []core.Part) error {
	for _, p := range parts {
		if p.Queue != c.QueueName() || p.Key != "" || p.ID == "" {
			return fmt.Errorf("%w: sqljobs: split %s: part %q of queue %q with key %q; parts are unkeyed batches of the claim's queue with an id", core.ErrInvalidConfig, c.String(), p.ID, p.Queue, p.Key)
		}
		if err := checkSize("split "+c.String(), len(p.Body)); err != nil {
			return err
		}
	}
	return be.settle(ctx, "split", c, func(ctx context.Context, h *handle) (bool, error) {
		if h.key != "" {
			return false, fmt.Errorf("%w: sqljobs: split %s: a keyed batch cannot be split; retry it", core.ErrInvalidConfig, c.String())
		}
		held := false
		err := be.attempt(ctx, func(ctx context.Context) error {
			held = false
			err := pgx.BeginFunc(ctx, be.pool, func(tx pgx.Tx) error {
				rows, err := query(ctx, be.on(tx), be.sql.ack, []int64{h.id}, []int64{h.token}, be.channel, be.syncCommit(h.excl))
				if err != nil {
					return err
				}
				n, err := countRows(rows)
				if err != nil {
					return err
				}
				if n == 0 {
					return errSplitLost
				}
				now := time.Now()
				for _, p := range parts {
					d := p.DelayFrom(now)
					delayUs := int64((d + time.Microsecond - 1) / time.Microsecond) // rounded up: never early
					body := p.Body
					if body == nil {
						body = []byte{}
					}
					if _, err := tx.Exec(ctx, be.sql.publish, p.Queue, p.ID, body, delayUs, p.Messages, be.channel, prio(p), micros(p.Lead), p.FairKey); err != nil {
						return err
					}
				}
				return nil
			})
			if errors.Is(err, errSplitLost) {
				return nil
			}
			held = err == nil
			return err
		})
		return held, err
	})
}
