package parity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// The contract group checks the rules every adapter follows (package core's doc, "Rules every
// adapter follows") on a raw client, without nodes: concurrency, Body ownership, after-Close
// behaviour, no adapter-side retries, and cancellation.

// PromptBound is how long a call that must not wait (any call after Close, a Fetch whose ctx
// is done or whose backend was closed under it) may take.
const PromptBound = time.Second

// UnavailableBound is how long a call to a broken backend may take before it returns an error
// wrapping core.ErrBackendUnavailable: the client's own timeouts and an SDK's few immediate
// transport retries fit in it; retrying with backoff until the backend comes back does not.
const UnavailableBound = 5 * time.Second

// timedCall runs fn and returns how long it took and its error; a panic fails the property.
func timedCall(x *X, what string, fn func() error) (took time.Duration, err error) {
	x.T.Helper()
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
				x.T.Errorf("%s panicked: %v", what, r)
			}
		}()
		err = fn()
	}()
	return time.Since(start), err
}

// ctxErr reports whether err is a context's error (cancelled or past its deadline).
func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// req1 is a FetchRequest for queue with free slots, the given lease and wait.
func req1(node, queue string, free int, lease, wait time.Duration) core.FetchRequest {
	return core.FetchRequest{Node: node, Lease: lease, Wait: wait, Max: max(free, 1),
		Queues: []core.QueueSlots{{Queue: queue, Free: free}}}
}

// collect fetches queue from b until quiet (two fetches in a row hand out nothing, after
// want claims arrived or Caps.Timeout passed), acking every claim, and returns how many times
// each batch id was handed out. Until Caps.Timeout, a Fetch error wrapping
// core.ErrBackendUnavailable is tried again. The claims' lease is at least one the machine
// keeps (keptLease of 2 s): an Ack a loaded machine sends after a short lease ran out would
// fail and hand the batch out again, counted twice.
func collect(x *X, b core.Backend, queue string, lease time.Duration, want int) map[string]int {
	x.T.Helper()
	lease = max(lease, x.keptLease(max(x.Caps.Lease, 2*time.Second)))
	seen := map[string]int{}
	total, empty := 0, 0
	deadline := time.Now().Add(x.Caps.Timeout)
	for empty < 2 || (total < want && time.Now().Before(deadline)) {
		ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		cs, err := b.Fetch(ctx, req1("parity-collect", queue, core.Unlimited, lease, x.Caps.PollWait))
		if errors.Is(err, core.ErrBackendUnavailable) && time.Now().Before(deadline) {
			// A receive that failed during an outage may report its error at the next
			// Fetch, after Restore (sqs): the next one works.
			cancel()
			continue
		}
		if err != nil {
			cancel()
			x.T.Fatalf("Fetch: %v", err)
		}
		for _, c := range cs {
			seen[c.ID]++
			total++
			if err := b.Ack(ctx, c); err != nil {
				x.T.Errorf("Ack: %v", err)
			}
		}
		cancel()
		if len(cs) == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return seen
}
