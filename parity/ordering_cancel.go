package parity

import (
	"context"
	"errors"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// The group "ordered_cancel" checks lookup and cancel on ordered queues, where a key's
// batches wait (held) behind the key's first batch (its head): held batches are stored, so the
// Inspector lists, finds and cancels them; cancelling the head lets the key's next batch run,
// as an ack would; cancelling a held batch leaves the rest of the key in order; a key whose
// batches are all cancelled is no longer held (core.KeyHolder). The native properties run
// where the adapter looks batches up (core.BatchInspector) and, to cancel, edits them
// (core.BatchEditor); the ledger property runs on every ordered adapter. Elsewhere they are
// counted as not supported by the adapter, never as passed. None runs under duplicate
// delivery: a native cancel takes back the copy it found, not a second copy.

func init() {
	register("ordered_cancel",
		property{name: "held_batches_listed_and_found", run: heldListed},
		property{name: "cancel_head_middle_tail_before_run", run: cancelHeadMiddleTail},
		property{name: "cancel_held_behind_running_head", run: cancelBehindRunningHead},
		property{name: "ledger_cancel_head_middle_tail", run: ledgerCancelHeadMiddleTail},
	)
}

// heldListed: a key's batches published while no listener runs (one of them holding two
// messages) are all listed and found by the Inspector without a ledger: the head queued,
// the batches behind it delayed (as Depths counts them), each message in its own batch's id;
// the backend holds the key; once a listener runs, the key is delivered in publish order and
// the backend holds it no more.
func heldListed(x *X) {
	x.needOrdering()
	raw := x.rawClient()
	x.needNative(raw, false)
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	n := x.nodeOn(raw, txmq.NodeOptions{})
	in := n.Inspector()
	batches := [][]string{{"k#0"}, {"k#1"}, {"k#2", "k#3"}, {"k#4"}}
	ids := publishBatches(x, raw, q, n, nil, batches)
	checkListed(x, in, q, ids, batches, "", true)
	checkHolds(x, raw, q, "k", true)
	checkDepth(x, raw, q, core.Depth{Ready: 1, Delayed: 3})

	lg := newRunLog(nil)
	lg.listen(x, q, n)
	want := []string{"k#0", "k#1", "k#2", "k#3", "k#4"}
	lg.wait(x, want)
	x.idle(n)
	lg.check(x, want)
	checkHolds(x, raw, q, "k", false)
	checkDepth(x, raw, q, core.Depth{})
}

// cancelHeadMiddleTail: with no listener running, key k holds six batches (one of two
// messages) and key z three. Cancelling, without a ledger, k's head, one message of a held
// batch, a held batch in the middle and k's tail, then z's tail, head and last batch: each
// cancel succeeds and the message is gone; the rest of k is listed (its new head queued, the
// batches behind it delayed) and counted by Depths (one ready, the others delayed); z is no
// longer held. A batch published afterwards joins the back of k, and once a listener runs,
// k's remaining messages are delivered in publish order, no cancelled one ever.
func cancelHeadMiddleTail(x *X) {
	x.needOrdering()
	raw := x.rawClient()
	x.needNative(raw, true)
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	n := x.nodeOn(raw, txmq.NodeOptions{})
	in := n.Inspector()
	ids := publishBatches(x, raw, q, n, nil, cancelLayout)
	checkListed(x, in, q, ids, cancelLayout, "", true)
	for _, name := range cancelOrder {
		cancelOK(x, in, ids, name)
	}
	for _, name := range cancelOrder {
		checkGone(x, in, ids, name, true)
	}
	rest := [][]string{{"k#1"}, {"k#2"}, {"k#4"}}
	checkListed(x, in, q, ids, rest, "", true)
	checkDepth(x, raw, q, core.Depth{Ready: 1, Delayed: 2})
	checkHolds(x, raw, q, "z", false)
	checkHolds(x, raw, q, "k", true)
	publishBatches(x, raw, q, n, ids, [][]string{{"k#7"}})
	checkListed(x, in, q, ids, append(rest, []string{"k#7"}), "", true)

	lg := newRunLog(nil)
	lg.listen(x, q, n)
	want := []string{"k#1", "k#2", "k#4", "k#7"}
	lg.wait(x, want)
	x.idle(n)
	lg.check(x, want)
	checkHolds(x, raw, q, "k", false)
	checkDepth(x, raw, q, core.Depth{})
}

// cancelLayout is the batches cancelHeadMiddleTail and its ledger twin publish, in order, and
// cancelOrder the messages they cancel: k's head, one message of a held batch of two, a held
// batch in the middle, k's tail, then z's tail, z's head and z's last batch.
var (
	cancelLayout = [][]string{{"k#0"}, {"k#1"}, {"k#2"}, {"k#3", "k#4"}, {"k#5"}, {"k#6"}, {"z#0"}, {"z#1"}, {"z#2"}}
	cancelOrder  = []string{"k#0", "k#3", "k#5", "k#6", "z#2", "z#0", "z#1"}
)

// cancelBehindRunningHead: while the head of key k runs (its listener waits), the four
// batches behind it are listed (delayed) and found; cancelling the running head is refused
// with ErrNotCancellable; cancelling the batch right behind it, one in the middle and the tail
// succeeds; Depths counts one in flight and one delayed. Once the head finishes, the rest of k
// is delivered in order and the key is no longer held.
func cancelBehindRunningHead(x *X) {
	x.needOrdering()
	raw := x.rawClient()
	x.needNative(raw, true)
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	n := x.nodeOn(raw, txmq.NodeOptions{})
	in := n.Inspector()
	started, release := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	x.T.Cleanup(open)
	lg := newRunLog(func(ctx context.Context, msgs []Msg) error {
		if msgs[0].K != "k#0" {
			return nil
		}
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	lg.listen(x, q, n)
	ids := publishBatches(x, raw, q, n, nil, [][]string{{"k#0"}})
	select {
	case <-started:
	case <-x.ctx().Done():
		x.T.Fatalf("the head of key k never started")
	}
	publishBatches(x, raw, q, n, ids, [][]string{{"k#1"}, {"k#2"}, {"k#3"}, {"k#4"}})
	checkListed(x, in, q, ids, [][]string{{"k#0"}, {"k#1"}, {"k#2"}, {"k#3"}, {"k#4"}}, "k#0", true)
	if _, err := in.Cancel(x.ctx(), ids["k#0"]); !errors.Is(err, txmq.ErrNotCancellable) {
		x.T.Errorf("Cancel of the running head k#0: %v; want ErrNotCancellable", err)
	}
	for _, name := range []string{"k#1", "k#3", "k#4"} {
		cancelOK(x, in, ids, name)
		checkGone(x, in, ids, name, true)
	}
	checkListed(x, in, q, ids, [][]string{{"k#0"}, {"k#2"}}, "k#0", true)
	checkDepth(x, raw, q, core.Depth{InFlight: 1, Delayed: 1})
	open()
	want := []string{"k#0", "k#2"}
	lg.wait(x, want)
	x.idle(n)
	lg.check(x, want)
	checkHolds(x, raw, q, "k", false)
	checkDepth(x, raw, q, core.Depth{})
}

// ledgerCancelHeadMiddleTail is cancelHeadMiddleTail with a ledger, on every ordered adapter:
// the held messages are listed and found; each cancel succeeds and the message reads
// cancelled; once a listener runs, k's remaining messages (and one published after the
// cancels) are delivered in publish order, no cancelled one ever, and neither key is held.
func ledgerCancelHeadMiddleTail(x *X) {
	x.needOrdering()
	led := x.ledger()
	raw := x.rawClient()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	n := x.nodeOn(raw, txmq.NodeOptions{Ledger: led})
	in := n.Inspector()
	ids := publishBatches(x, raw, q, n, nil, cancelLayout)
	checkListed(x, in, q, ids, cancelLayout, "", false)
	for _, name := range cancelOrder {
		cancelOK(x, in, ids, name)
	}
	for _, name := range cancelOrder {
		checkGone(x, in, ids, name, false)
	}
	publishBatches(x, raw, q, n, ids, [][]string{{"k#7"}})

	lg := newRunLog(nil)
	lg.listen(x, q, n)
	want := []string{"k#1", "k#2", "k#4", "k#7"}
	lg.wait(x, want)
	x.idle(n)
	lg.check(x, want)
	checkHolds(x, raw, q, "k", false)
	checkHolds(x, raw, q, "z", false)
}
