package parity

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register("faults",
		property{name: "close_with_done_ctx_keeps_buffer", run: closeWithDoneCtx},
	)
}

// closeWithDoneCtx: Close with a context that is already done (the usual
// `<-ctx.Done(); node.Close(ctx)`) still stores every accepted message: the buffer drains on a
// context of its own. A node opened afterwards receives all of them.
func closeWithDoneCtx(x *X) {
	const n = 20
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 5})
	a := x.node(txmq.NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
	keys := publishKeys(x, q, a, "closing", n, 2)
	x.eventually(func() bool { return a.Stats().Buffered == n }, func() string {
		return fmt.Sprintf("node buffers %d messages before Close; want %d", a.Stats().Buffered, n)
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.Close(ctx) // nothing runs: an error here is not the point; losing messages is
	if s := a.Stats(); s.Buffered != 0 || s.PublishedMessages != n || len(s.Dropped) != 0 {
		x.T.Fatalf("after Close with a done ctx: %d buffered, %d of %d published, dropped %v; want every message stored", s.Buffered, s.PublishedMessages, n, s.Dropped)
	}
	rec := newRecorder()
	b := x.node(txmq.NodeOptions{})
	listen(x, rec, q, b, nil)
	waitDelivered(x, rec, keys)
	x.idle(b)
	assertSame(x, rec, keys)
}
