package parity

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// rawBatch encodes a batch of Msg keys for driving a backend directly.
func rawBatch(queue string, exclusive bool, keys ...string) core.OutgoingBatch {
	env := &envelope.Envelope{ID: core.NewID(), Queue: queue, Created: time.Now()}
	for _, k := range keys {
		b, _ := json.Marshal(Msg{K: k})
		env.MessageIDs = append(env.MessageIDs, core.NewID())
		env.Messages = append(env.Messages, b)
	}
	return core.OutgoingBatch{ID: env.ID, Queue: queue, Body: envelope.Encode(env), Exclusive: exclusive, Messages: len(keys)}
}

// fetchOne fetches from b until it hands out one claim of queue, within Caps.Timeout.
func fetchOne(x *X, b core.Backend, queue string, lease time.Duration) *core.Claim {
	x.T.Helper()
	deadline := time.Now().Add(x.Caps.Timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		cs, err := b.Fetch(ctx, core.FetchRequest{Node: "parity-" + core.NewID(), Lease: lease, Wait: x.Caps.PollWait, Max: 1,
			Queues: []core.QueueSlots{{Queue: queue, Free: 1}}})
		cancel()
		if err != nil {
			x.T.Fatalf("Fetch: %v", err)
		}
		if len(cs) > 1 {
			x.T.Fatalf("Fetch with Free 1 returned %d claims", len(cs))
		}
		if len(cs) == 1 {
			if cs[0].Queue != queue {
				x.T.Fatalf("Fetch for %s returned a claim of %s", queue, cs[0].Queue)
			}
			return cs[0]
		}
	}
	x.T.Fatalf("no claim of %s within %v", queue, x.Caps.Timeout)
	return nil
}

// depths returns the backend's depth of queue.
func depths(x *X, b core.Backend, queue string) core.Depth {
	x.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
	defer cancel()
	d, err := b.Depths(ctx, []string{queue})
	if err != nil {
		x.T.Fatalf("Depths: %v", err)
	}
	return d[queue].Counts() // the counts: OldestReady is optional for adapters
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }
