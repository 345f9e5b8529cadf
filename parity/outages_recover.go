package parity

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("outages",
		property{name: "fetch_recovers_promptly", run: fetchRecoversPromptly},
	)
}

// recoverBound is how soon after the backend answers again a node must deliver a fresh
// publish: the driver's longest fetch backoff (5 s, with its jitter) plus a reconnect and a
// fetch. An adapter that keeps errors from before the outage and returns them one per Fetch
// costs the driver one more backoff per stale error, and misses it.
const recoverBound = 10 * time.Second

// fetchRecoversPromptly: an outage long enough for the node's fetches to back off, on an
// ordered queue with several keys where the adapter orders by key (an adapter may poll each
// key's lane apart, and each lane's pull can fail on its own), on a plain queue elsewhere.
// Once a raw client publishes again, a publish of every key is delivered within recoverBound.
func fetchRecoversPromptly(x *X) {
	keyed := x.ordersKeys() == nil
	q := declare(x, txmq.QueueConfig[Msg]{Ordered: keyed})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	listen(x, rec, q, n, func(context.Context, []Msg) error { return nil })
	publish := func(prefix string) []string {
		var keys []string
		for i := range 8 {
			k := fmt.Sprintf("%s-%d", prefix, i)
			var opts []txmq.PublishOption
			if keyed {
				opts = append(opts, txmq.Key(fmt.Sprintf("lane-%d", i)))
			}
			if err := q.Publish(context.Background(), n, Msg{K: k}, opts...); err != nil {
				x.T.Fatalf("Publish %s: %v", k, err)
			}
			keys = append(keys, k)
		}
		return keys
	}
	waitDelivered(x, rec, publish("before")) // every lane set up and polled

	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	// Long enough for the node's fetch backoff to grow past a second (100 ms doubling).
	sleep(3 * time.Second)
	x.Env.Restore(x.T)
	restored = true
	b := x.rawClient()
	probe := x.queueName()
	x.eventually(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		defer cancel()
		return b.Publish(ctx, rawBatch(probe, false, "probe")) == nil
	}, "a raw client publishes again after Restore")
	start := time.Now()
	after := publish("after")
	waitDelivered(x, rec, after)
	if took := time.Since(start); took > recoverBound {
		x.T.Fatalf("after the outage the node took %v to deliver a fresh publish of every key; want at most %v (stale errors returned one per Fetch, or a backoff past its cap?)", took.Round(time.Millisecond), recoverBound)
	}
}
