package parity

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// The group "ordering" checks per-key order (txmq.QueueConfig.Ordered, core.KeyOrderer). On an
// adapter without the capability only "declare" runs for real (it asserts the refusal); every
// other property is counted as "not supported by the adapter", never as passed.

func init() {
	register("ordering",
		property{name: "declare", run: orderingDeclare},
		property{name: "order_within_key_three_nodes", dup: true, run: orderThreeNodes},
		property{name: "failing_batch_blocks_only_its_key", run: orderFailingBlocksKey},
		property{name: "lost_lease_redelivers_first", run: orderLostLease},
		property{name: "order_through_outbox", dup: true, run: orderThroughOutbox},
		property{name: "thousand_keys_interleaved", dup: true, run: orderThousandKeys},
		property{name: "delay_holds_back_its_key", dup: true, run: orderDelays},
	)
}

// ordersKeys reports whether the adapter enforces per-key order (nil), asking a raw client.
func (x *X) ordersKeys() error { return core.OrdersKeys(x.rawClient()) }

// needOrdering ends a property on an adapter without per-key ordering, counted as not
// supported (neither passed nor failed).
func (x *X) needOrdering() {
	x.T.Helper()
	if err := x.ordersKeys(); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
}

// orderingDeclare: on an adapter without per-key ordering, an Ordered queue is refused with an
// error naming the queue and the adapter, by NewNode (declared before) and by Listen and
// Publish (declared after the node). On one with it, the node takes the queue, a publish
// without a key is an error naming the queue, and a key on an unordered queue is one too.
func orderingDeclare(x *X) {
	if oerr := x.ordersKeys(); oerr != nil {
		q := declare(x, txmq.QueueConfig[Msg]{Ordered: true})
		c, _ := x.client()
		_, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
		x.refused(err, q.Name(), "NewNode")
		reg := txmq.NewRegistry()
		n := x.nodeOnRegistry(reg)
		q2, derr := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Ordered: true})
		if derr != nil {
			x.T.Fatalf("DeclareIn: %v", derr)
		}
		x.refused(q2.Listen(n, func(context.Context, []Msg) error { return nil }), q2.Name(), "Listen")
		x.refused(q2.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("k")), q2.Name(), "Publish")
		return
	}
	q := declare(x, txmq.QueueConfig[Msg]{Ordered: true})
	plain := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	if err := q.Publish(context.Background(), n, Msg{K: "a"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), q.Name()) {
		x.T.Fatalf("Publish without a key on an Ordered queue: %v; want ErrInvalidConfig naming queue %q", err, q.Name())
	}
	if err := plain.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("k")); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), plain.Name()) {
		x.T.Fatalf("Publish with a key on an unordered queue: %v; want ErrInvalidConfig naming queue %q", err, plain.Name())
	}
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("has space")); !errors.Is(err, core.ErrInvalidConfig) {
		x.T.Fatalf("Publish with key %q: %v; want ErrInvalidConfig (not portable)", "has space", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("acct-42")); err != nil {
		x.T.Fatalf("Publish with a key: %v", err)
	}
}

// nodeOnRegistry makes a started node on a new client with reg as its registry.
func (x *X) nodeOnRegistry(reg *txmq.Registry) *txmq.Node {
	x.T.Helper()
	c, _ := x.client()
	n, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: reg, Logger: x.logger, Lease: x.Caps.Lease, PollWait: x.Caps.PollWait})
	if err != nil {
		x.T.Fatalf("NewNode: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// refused fails unless err is ErrInvalidConfig naming the queue and the adapter.
func (x *X) refused(err error, queue, call string) {
	x.T.Helper()
	if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "does not") {
		x.T.Fatalf("%s with Ordered queue %q on adapter %s: %v; want ErrInvalidConfig naming the queue and saying the adapter does not order by key", call, queue, x.h.Name(), err)
	}
}

// ordered declares an Ordered queue (Try unless cfg says otherwise).
func ordered(x *X, cfg txmq.QueueConfig[Msg]) *txmq.Queue[Msg] {
	cfg.Ordered = true
	return declare(x, cfg)
}
