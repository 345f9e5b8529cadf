package parity

import (
	"context"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
)

// A cancel applies to the messages it found, never to a later publish that reuses the id (on
// a queue without IDDedupWindow, publishing an id twice delivers it twice): the messages
// group, with and without ledger mode.

func init() {
	register("messages",
		property{name: "ledger_cancel_spares_later_publish_of_id", dup: true, run: func(x *X) { ledgerCancelSparesLater(x, false) }},
		property{name: "ledger_mode_cancel_spares_later_publish_of_id", run: func(x *X) { ledgerCancelSparesLater(x, true) }},
	)
}

// ledgerCancelSparesLater: three messages are published delayed, each with an id of its own
// (a caller id published directly, a caller id published in a transaction, an id shaped as
// core.NewID makes them), and cancelled while they wait. Then each id is published again, the
// same way: every new message is delivered and reads completed, while the cancelled ones are
// never delivered, past their due time too, and the id keeps reading completed after the
// cancelled batch's turn.
func ledgerCancelSparesLater(x *X, mode bool) {
	var lg *ledger.Ledger
	if mode {
		lg = x.ledgerModeLedger(5 * time.Second)
	} else {
		lg = x.ledger()
	}
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try})
	store := x.store(lg.Keeping(x.rawClient()), outbox.Options{})
	if err := store.Start(x.ctx()); err != nil {
		x.T.Fatalf("outbox Start: %v", err)
	}
	n := x.node(txmq.NodeOptions{Ledger: lg})
	in := n.Inspector()
	rec := newRecorder()
	listen(x, rec, q, n, nil)

	type path struct {
		name, id string
		inTx     bool
	}
	paths := []path{
		{name: "direct", id: "reuse/" + q.Name() + "/direct"},
		{name: "tx", id: "reuse/" + q.Name() + "/tx", inTx: true},
		{name: "generated", id: core.NewID()},
	}
	publish := func(p path, key string, opts ...txmq.PublishOption) {
		x.T.Helper()
		opts = append(opts, txmq.ID(p.id))
		if !p.inTx {
			if err := q.Publish(context.Background(), n, Msg{K: key}, opts...); err != nil {
				x.T.Fatalf("Publish(%s): %v", key, err)
			}
			return
		}
		if err := runInTx(x.ctx(), store, func(ctx context.Context) error {
			return q.Publish(ctx, n, Msg{K: key}, opts...)
		}); err != nil {
			x.T.Fatalf("RunInTx(%s): %v", key, err)
		}
	}
	delay := 4 * time.Second
	for _, p := range paths {
		publish(p, "old-"+p.name, txmq.After(delay))
	}
	published := time.Now()
	for _, p := range paths {
		waitState(x, in, p.id, core.StateDelayed)
		if m, err := in.Cancel(context.Background(), p.id); err != nil || m.State != core.StateCancelled {
			x.T.Fatalf("Cancel(%s) = %+v, %v; want it cancelled", p.id, m, err)
		}
	}
	var fresh []string
	for _, p := range paths {
		publish(p, "new-"+p.name)
		fresh = append(fresh, "new-"+p.name)
	}
	waitDelivered(x, rec, fresh)
	for _, p := range paths {
		waitState(x, in, p.id, core.StateCompleted)
	}
	// Past the old batches' due time and the tolerance, with the node idle, they had their
	// turn: the cancel still holds them, and the ids still read as their new messages.
	time.Sleep(time.Until(published.Add(delay + x.Caps.DueTolerance)))
	x.idle(n)
	for _, p := range paths {
		if rec.Has("old-" + p.name) {
			x.T.Errorf("the listener received old-%s, cancelled before its batch ran", p.name)
		}
		if m, err := in.Get(context.Background(), p.id); err != nil || m.State != core.StateCompleted {
			x.T.Errorf("Get(%s) after the cancelled batch's turn = %+v, %v; want completed (the later publish ran)", p.id, m, err)
		}
	}
	if x.T.Failed() {
		x.T.Logf("deliveries: %s", rec.Summary())
	}
}
