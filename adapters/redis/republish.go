package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/txmq/txmq/core"
)

// republishScript is publishScript for a deliberate re-publish of a batch id
// (core.OutgoingBatch.PublishID set: a dead-letter replay). The queue keeps one batch per id,
// so when the original is still stored (dead-lettered, but its Drop did not land) the replay
// cannot be stored beside it:
//
//   - while the original's lease is live, its holder may still settle it: nothing is stored
//     and the script returns -1;
//   - otherwise (its lease ran out, or it waits in the due set for a node to drop it, which
//     no node may be running to do) the replay takes its place, as a rewrite does: the body
//     becomes the replay's, its handouts restart at 0 (which also ends the old lease's token,
//     so a late settle of the old holder is refused), an expired lease goes back to the due
//     set, and its key, fairness key and lead, which are the batch's own, are kept. It
//     returns 2;
//   - the same replay repeated (its body is the one stored) is the no-op a repeated publish
//     gets (0).
//
// An id not stored is published as publishScript does (1).
var republishScript = goredis.NewScript(nowLua + leadLua + fairLua + `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then return 0 end
  local leaseEnd = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if leaseEnd and tonumber(leaseEnd) > now then return -1 end
  fairOn = redis.call('EXISTS', FK) == 1
  if leaseEnd then
    local score = tonumber(leaseEnd) - leadOf(ARGV[1])
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZADD', KEYS[1], score, ARGV[1])
    fairAdd(ARGV[1], score)
  end
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[1], 0)
  redis.call('PUBLISH', ARGV[4], '1')
  return 2
end
` + publishLua)

// republish runs republishScript; an original still leased is an error wrapping
// core.ErrStillStored.
func (be *Backend) republish(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	n, err := republishScript.Run(ctx, be.rdb, k.script, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b)).Int()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("redis: publish batch %s to queue %q again (publish %s): an earlier batch of that id is still stored and leased; publish again once its lease ends: %w",
			b.ID, b.Queue, b.PublishID, core.ErrStillStored)
	}
	return nil
}
