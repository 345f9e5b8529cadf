package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/txmq/txmq/core"
)

// republishScript is publishScript for a deliberate re-publish of a batch id
// (core.OutgoingBatch.PublishID set: a dead-letter replay). The queue keeps one batch per id,
// so when the id is still stored with another body (the original, dead-lettered but its Drop
// not landed) the replay cannot be stored beside it: nothing is stored and the script returns
// -1. The same replay repeated (its body is the one stored) is the no-op a repeated publish
// gets (0). An id not stored is published as publishScript does (1).
var republishScript = goredis.NewScript(nowLua + fairLua + `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then return 0 end
  return -1
end
` + publishLua)

// republish runs republishScript; an id still stored is an error wrapping
// core.ErrStillStored (the caller removes the stored batch, if it is not in flight, through
// core.BatchEditor and publishes again: outbox.Store.Replay does).
func (be *Backend) republish(ctx context.Context, k *queueKeys, b core.OutgoingBatch, delayMs int64) error {
	n, err := republishScript.Run(ctx, be.rdb, k.script, b.ID, b.Body, delayMs, k.wake, b.Key, leadMs(b.Lead), fairKeyArg(b)).Int()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("redis: publish batch %s to queue %q again (publish %s): an earlier batch of that id is still stored: %w",
			b.ID, b.Queue, b.PublishID, core.ErrStillStored)
	}
	return nil
}
