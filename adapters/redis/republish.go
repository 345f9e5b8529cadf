package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/txmq/txmq/core"
)

// republishScript is publishScript for a deliberate re-publish of a batch id
// (core.OutgoingBatch.PublishID set: a dead-letter replay). The queue keeps one batch per id,
// so when the original is still stored (dead-lettered, but its Drop did not land) the replay
// cannot be stored beside it. Nothing is stored then, and the script returns:
//
//   - 0 when the stored body is the replay's (the same replay repeated: the no-op a repeated
//     publish gets);
//   - -1 while the original's lease is live (its holder may still settle it);
//   - -2 otherwise (its lease ran out, or it waits for a node to claim and drop it, and no
//     node may be running to do that): republish removes it and publishes again.
//
// An id not stored is published as publishScript does (1).
var republishScript = goredis.NewScript(nowLua + fairLua + `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then return 0 end
  local leaseEnd = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if leaseEnd and tonumber(leaseEnd) > now then return -1 end
  return -2
end
` + publishLua)

// republish runs republishScript. An original under a live lease is an error wrapping
// core.ErrStillStored. One that is not is removed as a cancel removes a batch (editScript:
// an expired lease ended, the batch unlinked from its ordering key, the key's next batch due
// when it was the head), and the replay is published again: it goes where any publish goes,
// due now at the back of its key, as a replay promises. The two steps are two scripts: a
// claim in between finds the original gone, and a concurrent publish of the id (there is
// none: Replay holds the dead letter's row) would make the second attempt answer as the
// first did.
func (be *Backend) republish(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	for attempt := 0; ; attempt++ {
		n, err := republishScript.Run(ctx, be.rdb, k.script, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b)).Int()
		if err != nil {
			return err
		}
		if n >= 0 {
			return nil
		}
		if n == -2 && attempt == 0 {
			err := be.edit(ctx, "remove the original of replayed batch", b.Queue, b.ID, editRemove, nil)
			if err == nil || errors.Is(err, core.ErrMessageNotFound) {
				continue
			}
			if !errors.Is(err, core.ErrNotCancellable) {
				return err
			}
		}
		return fmt.Errorf("redis: publish batch %s to queue %q again (publish %s): an earlier batch of that id is still stored and leased; publish again once its lease ends: %w",
			b.ID, b.Queue, b.PublishID, core.ErrStillStored)
	}
}
