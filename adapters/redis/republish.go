package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/txmq/txmq/core"
)

// republishScript is publishScript for a deliberate re-publish of a batch id
// (core.OutgoingBatch.PublishID set: a dead-letter replay). The queue keeps one batch per id,
// so while the original is still stored (dead-lettered, but its Drop did not land) the replay
// cannot be: it returns -1 and stores nothing, instead of the no-op a repeated publish gets.
// The same replay repeated (its body is the one stored) is that no-op (0).
var republishScript = goredis.NewScript(nowLua + fairLua + `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then return 0 end
  return -1
end
` + publishLua)

// republish runs republishScript; an original still stored is an error wrapping
// core.ErrStillStored.
func (be *Backend) republish(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	n, err := republishScript.Run(ctx, be.rdb, k.script, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b)).Int()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("redis: publish batch %s to queue %q again (publish %s): an earlier batch of that id is still stored; publish again once it is settled or dropped: %w",
			b.ID, b.Queue, b.PublishID, core.ErrStillStored)
	}
	return nil
}
