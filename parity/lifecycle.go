package parity

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("lifecycle",
		property{name: "close_drains", run: closeDrains},
		property{name: "publish_after_close_errors", run: publishAfterClose},
		property{name: "depths_add_up", run: depthsAddUp},
	)
}

// closeDrains: Close waits for running listeners and flushes the publish buffer within its
// context: when it returns, the running batches finished and were settled, and every buffered
// message is in the backend, where another node finds it.
func closeDrains(x *X) {
	slow := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	buffered := declare(x, txmq.QueueConfig[Msg]{})
	recSlow, recBuf := newRecorder(), newRecorder()
	started := make(chan struct{}, 8)
	var finished atomic.Int64
	// A long lease (steadyLease): a slow batch whose lease a loaded machine lost would run
	// again on b, which is not what Close is checked for.
	o := x.steadyLease()
	o.FlushWindow, o.FlushCap = time.Hour, time.Hour
	a := x.node(o)
	listen(x, recSlow, slow, a, func(ctx context.Context, _ []Msg) error {
		started <- struct{}{}
		time.Sleep(500 * time.Millisecond)
		finished.Add(1)
		return nil
	})
	slowKeys := publishKeys(x, slow, a, "slow", 3, 3)
	// The buffer holds these until Close: the node's window is an hour.
	for range 3 {
		select {
		case <-started:
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("slow batches did not start")
		}
	}
	bufKeys := publishKeys(x, buffered, a, "buf", 50, 10)
	// The slow batches' own flush may still be finishing (a backend may deliver a batch before
	// its Publish returns), so wait for exactly the 50 held by the hour-long window.
	x.eventually(func() bool { return a.Stats().Buffered == 50 }, func() string {
		return fmt.Sprintf("node buffers %d messages before Close; want 50", a.Stats().Buffered)
	})
	ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		x.T.Fatalf("Close: %v", err)
	}
	if f := finished.Load(); f != 3 {
		x.T.Fatalf("Close returned with %d of 3 running listeners finished", f)
	}
	if s := a.Stats(); s.InFlight != 0 || s.Buffered != 0 {
		x.T.Fatalf("after Close: %d in flight, %d buffered", s.InFlight, s.Buffered)
	}
	b := x.node(txmq.NodeOptions{})
	listen(x, recBuf, buffered, b, nil)
	listen(x, recSlow, slow, b, nil)
	waitDelivered(x, recBuf, bufKeys)
	x.idle(b)
	assertSame(x, recBuf, bufKeys)
	if r := recSlow.Runs(); r != len(slowKeys) {
		x.T.Fatalf("slow batches ran %d times; want %d: Close must settle them, not leave them to run again", r, len(slowKeys))
	}
}

// publishAfterClose: publishing on a closed node fails with core.ErrClosed, and so does
// registering a listener.
func publishAfterClose(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	if err := n.Close(context.Background()); err != nil {
		x.T.Fatalf("Close: %v", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "late"}); !errors.Is(err, core.ErrClosed) {
		x.T.Fatalf("Publish after Close: %v; want an error wrapping core.ErrClosed", err)
	}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "late"}}, txmq.After(time.Second)); !errors.Is(err, core.ErrClosed) {
		x.T.Fatalf("delayed PublishMany after Close: %v; want core.ErrClosed", err)
	}
	if err := q.Listen(n, func(context.Context, []Msg) error { return nil }); !errors.Is(err, core.ErrClosed) {
		x.T.Fatalf("Listen after Close: %v; want core.ErrClosed", err)
	}
}

// depthsAddUp: Depths reports ready, in-flight and delayed batches, they add up to what was
// stored, they follow claims and acks, and a queue never used reports zeros.
func depthsAddUp(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	qn, unused := x.queueName(), x.queueName()
	for i := range 5 {
		if err := b.Publish(ctx, rawBatch(qn, false, "ready", string(rune('a'+i)))); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	for range 2 {
		ob := rawBatch(qn, false, "delayed")
		ob.NotBefore = time.Now().Add(10 * time.Minute)
		if err := b.Publish(ctx, ob); err != nil {
			x.T.Fatalf("Publish delayed: %v", err)
		}
	}
	c1 := fetchOne(x, b, qn, 10*x.Caps.Lease)
	c2 := fetchOne(x, b, qn, 10*x.Caps.Lease)
	want := core.Depth{Ready: 3, InFlight: 2, Delayed: 2}
	var got core.Depth
	x.eventually(func() bool { got = depths(x, b, qn); return got == want }, func() string {
		return "depths " + depthString(got) + ", want " + depthString(want)
	})
	if got.Ready+got.InFlight+got.Delayed != 7 {
		x.T.Fatalf("depths add up to %d; 7 batches stored", got.Ready+got.InFlight+got.Delayed)
	}
	for _, c := range []*core.Claim{c1, c2} {
		if err := b.Ack(ctx, c); err != nil {
			x.T.Fatalf("Ack: %v", err)
		}
	}
	want = core.Depth{Ready: 3, Delayed: 2}
	x.eventually(func() bool { got = depths(x, b, qn); return got == want }, func() string {
		return "after acks: depths " + depthString(got) + ", want " + depthString(want)
	})
	if d := depths(x, b, unused); d != (core.Depth{}) {
		x.T.Fatalf("a queue never used reports %s", depthString(d))
	}
}

func depthString(d core.Depth) string {
	return "ready=" + itoa(d.Ready) + " in_flight=" + itoa(d.InFlight) + " delayed=" + itoa(d.Delayed)
}

func itoa(n int64) string { return fmtInt(n) }
