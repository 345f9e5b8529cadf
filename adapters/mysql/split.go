package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

var _ core.Splitter = (*Backend)(nil)

// errSplitLost rolls back a Split whose claim's lease no longer held.
var errSplitLost = errors.New("mysql: split: lease not held")

// Split settles a claim whose batch the engine split by per-message outcomes, in one
// transaction: the claim's row is deleted under its live lease (and its Exclusive lock
// released) and each part inserted as a new batch of the queue, due after its Delay on the
// database's clock. A lease that no longer holds rolls everything back and returns an error
// wrapping core.ErrLeaseLost. Parts are unkeyed batches of the claim's queue (an ordered batch
// keeps its key's head through Retry instead).
func (be *Backend) Split(ctx context.Context, c *core.Claim, parts []core.Part) error {
	op := "split " + c.String()
	for _, p := range parts {
		if p.Queue != c.QueueName() || p.Key != "" || p.ID == "" {
			return fmt.Errorf("%w: mysql: %s: part %q of queue %q with key %q; parts are unkeyed batches of the claim's queue with an id", core.ErrInvalidConfig, op, p.ID, p.Queue, p.Key)
		}
		if len(p.ID) > maxNameBytes {
			return fmt.Errorf("%w: mysql: %s: part id %q is over %d bytes", core.ErrInvalidConfig, op, p.ID, maxNameBytes)
		}
		if err := be.checkSize(op, len(p.Body)); err != nil {
			return err
		}
	}
	return be.settle(ctx, "split", c, func(ctx context.Context, h *handle) (bool, error) {
		if h.key != "" {
			return false, fmt.Errorf("%w: mysql: %s: a keyed batch cannot be split; retry it", core.ErrInvalidConfig, op)
		}
		held := false
		err := be.attempt(ctx, func(ctx context.Context) error {
			held = false
			err := inTx(ctx, be.db, nil, func(tx *sql.Tx) error {
				n, err := affected(ctx, tx, be.sql.ackOne, h.id, h.token)
				if err != nil {
					return err
				}
				if n == 0 {
					return errSplitLost
				}
				if h.excl {
					if _, err := tx.ExecContext(ctx, be.sql.exclusiveRelease, h.queue, h.id); err != nil {
						return err
					}
				}
				now := time.Now()
				for _, p := range parts {
					d := p.DelayFrom(now)
					delayUs := int64((d + time.Microsecond - 1) / time.Microsecond) // rounded up: never early
					body := p.Body
					if body == nil {
						body = []byte{}
					}
					if _, err := tx.ExecContext(ctx, be.sql.publish, p.Queue, p.ID, body, delayUs, p.Messages, prio(p), micros(p.Lead), p.FairKey); err != nil {
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
		if held {
			be.wake.Signal(h.queue)
		}
		return held, err
	})
}
