package parity

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "queues_listed", run: queuesListed},
	)
}

// queuesListed: an adapter that lists its queues (core.QueueLister, what `txmq status` and
// `txmq ui` call to show busy queues no table names) lists a queue once a batch of it is
// stored, under the queue's own name, sorted and without duplicates; a queue never used is
// not listed. An adapter without it counts as not supported, never as passed, and
// core.ListQueues reports core.ErrListUnsupported for it, never an empty list.
func queuesListed(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	q, never := x.queueName(), x.queueName()
	if _, ok := b.(core.QueueLister); !ok {
		if qs, err := core.ListQueues(ctx, b); !errors.Is(err, core.ErrListUnsupported) {
			x.T.Fatalf("ListQueues on a backend without core.QueueLister = %v, %v; want an error wrapping core.ErrListUnsupported", qs, err)
		}
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: no queue listing (core.QueueLister)", x.h.Name())
	}
	if err := b.Publish(ctx, rawBatch(q, false, "listed")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	// A listing is an operator's call that may say "unavailable, try again" on a loaded
	// backend (a cluster's stream listing past the client's timeout): it is retried within
	// the suite's timeout, as an operator would; any other error fails.
	var (
		qs  []string
		err error
	)
	x.eventually(func() bool {
		qs, err = core.ListQueues(ctx, b)
		return err == nil || !errors.Is(err, core.ErrBackendUnavailable)
	}, func() string { return fmt.Sprintf("ListQueues answers: %v", err) })
	if err != nil {
		x.T.Fatalf("ListQueues: %v", err)
	}
	if !slices.Contains(qs, q) {
		x.T.Fatalf("ListQueues lacks %q, published to: %s", q, strings.Join(qs, ", "))
	}
	if slices.Contains(qs, never) {
		x.T.Fatalf("ListQueues lists %q, never used", never)
	}
	if !slices.IsSorted(qs) || len(slices.Compact(slices.Clone(qs))) != len(qs) {
		x.T.Fatalf("ListQueues = %v: want sorted, without duplicates", qs)
	}
}
