package parity

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("outcomes",
		property{name: "exclusive_parts_one_at_a_time", run: exclusiveParts},
	)
}

// exclusiveParts: on an Exclusive queue the parts of split batches are ordinary batches of the
// queue: across two nodes at most one batch (whole or part) runs at a time, and every message
// still ends on its path (the retried ones after two failures, the snoozed ones after one
// snooze).
func exclusiveParts(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{Exclusive: true, MaxBatchMessages: 4, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	rec := newRecorder()
	fn := func(ctx context.Context, msgs []Msg) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			switch {
			case strings.HasSuffix(m.K, "-retry") && rec.Count(m.K) <= 2:
				res.Retry(i, errBoom)
			case strings.HasSuffix(m.K, "-snooze") && rec.Count(m.K) <= 1:
				res.Snooze(i, 20*time.Millisecond)
			}
		}
		time.Sleep(5 * time.Millisecond) // a run long enough for an overlap to show
		return res.Err()
	}
	o := x.steadyLease()
	a, b := x.node(o), x.node(o)
	listen(x, rec, q, a, fn)
	listen(x, rec, q, b, fn)
	var keys []string
	for i := range 3 {
		batch := []Msg{}
		for _, r := range []string{"done", "retry", "snooze", "done2"} {
			k := fmt.Sprintf("%s-%d-%s", q.Name(), i, r)
			keys = append(keys, k)
			batch = append(batch, Msg{K: k})
		}
		if err := q.PublishMany(context.Background(), a, batch); err != nil {
			x.T.Fatalf("PublishMany: %v", err)
		}
	}
	x.eventually(func() bool {
		for _, k := range keys {
			want := 1
			switch {
			case strings.HasSuffix(k, "-retry"):
				want = 3
			case strings.HasSuffix(k, "-snooze"):
				want = 2
			}
			if rec.Count(k) < want {
				return false
			}
		}
		return true
	}, func() string { return "every message on its path: " + rec.Summary() })
	x.idle(a, b)
	if p := rec.Peak(q.Name()); p != 1 {
		x.T.Fatalf("peak concurrency %d on an Exclusive queue; want 1", p)
	}
}
