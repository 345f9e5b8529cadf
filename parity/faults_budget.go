package parity

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("budget",
		property{name: "exact_while_receives_are_held", run: budgetWhileHeld},
		property{name: "exact_across_closes_mid_poll", run: budgetAcrossCloses},
		property{name: "exact_while_exclusive_receive_is_held", run: budgetWhileHeldExclusive},
	)
}

// budgetLease is the lease of the budget properties' nodes and clients: the suite's, but at
// least 2 s, and longer on a loaded machine (keptLease), so that stalls do not lose the leases
// of the batches the property itself gives back (which would be counted, rightly, as runs of
// a node that died).
func budgetLease(x *X) time.Duration { return x.keptLease(max(x.Caps.Lease, 2*time.Second)) }

// budgetBatches is how many always-failing batches the budget properties publish (half as
// many on an Exclusive queue, which runs them one at a time).
const budgetBatches = 6

// budgetWhileHeld: a client whose node is at capacity for the queue asks for a few batches
// now and then (a Fetch with small Free that returns early, its receive still outstanding),
// and then does not fetch that queue again for longer than a lease, as a node whose slots are
// full by long-running batches does not. Whatever the adapter does with the receives it holds
// and cannot hand out, they are not runs: another node's always-failing listener runs every
// batch exactly MaxAttempts times, then each is dead-lettered once, delivery_exhausted.
func budgetWhileHeld(x *X) { holdWhileRunning(x, false) }

// budgetWhileHeldExclusive is budgetWhileHeld on an Exclusive queue: the held receive is the
// queue's one batch in flight, which blocks the queue until the adapter gives it back.
func budgetWhileHeldExclusive(x *X) { holdWhileRunning(x, true) }

func holdWhileRunning(x *X, exclusive bool) {
	runBudget(x, exclusive, func(q core.QueueSlots, published <-chan struct{}, stop <-chan struct{}) {
		h := x.rawClient()
		warmUp(x, h, q)
		if !waitPublished(published, stop) {
			return
		}
		for i := 0; ; i++ {
			holdOnce(x, h, q)
			// Back after more than a lease (the held receives' leases ran out), then after
			// most of one (half gone), and so on.
			period := budgetLease(x) * 3 / 2
			if i%2 == 1 {
				period = budgetLease(x) * 3 / 4
			}
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
		}
	})
}

// budgetAcrossCloses: clients keep starting a receive and closing while it is outstanding (a
// node shutting down mid-poll), while another node's always-failing listener runs the
// batches: every batch still runs exactly MaxAttempts times, then is dead-lettered once. A
// backend whose Env hands out one shared client (memory) is not closed here.
func budgetAcrossCloses(x *X) {
	shared := x.rawClient() == x.rawClient()
	runBudget(x, false, func(q core.QueueSlots, published <-chan struct{}, stop <-chan struct{}) {
		if !waitPublished(published, stop) {
			return
		}
		for i := 0; ; i++ {
			h := x.rawClient()
			warmUp(x, h, q)
			holdOnce(x, h, q)
			// Close at varying points of the outstanding receive.
			sleep(time.Duration(i%4) * x.Caps.PollWait / 4)
			if !shared {
				_ = h.Close()
			}
			select {
			case <-stop:
				return
			case <-time.After(x.Caps.PollWait / 2):
			}
		}
	})
}

// waitPublished waits until published or stop is closed and reports whether published was: a
// property that fails before its batches are stored closes only stop, and its disturbing
// goroutine must end then rather than wait forever (the property's cleanup waits for it).
func waitPublished(published, stop <-chan struct{}) bool {
	select {
	case <-published:
		return true
	case <-stop:
		return false
	}
}

// runBudget publishes budgetBatches one-message batches to a queue with MaxAttempts 3 whose
// listener always fails (an Exclusive queue when exclusive, with half as many batches), runs
// disturb(slots, published, stop) in the background meanwhile (the listening node starts a
// poll wait after published is closed), and checks that every message ran exactly
// MaxAttempts times and that every batch has one dead letter with reason delivery_exhausted
// and MaxAttempts attempts.
func runBudget(x *X, exclusive bool, disturb func(slots core.QueueSlots, published, stop <-chan struct{})) {
	const budget = 3
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: budget, MaxBatchMessages: 1, Exclusive: exclusive})
	batches := budgetBatches
	if exclusive {
		batches /= 2
	}
	rec := newRecorder()
	stop, done, published := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		slots := core.QueueSlots{Queue: q.Name(), Free: 3}
		if exclusive {
			slots = core.QueueSlots{Queue: q.Name(), Free: 1, Exclusive: true}
		}
		disturb(slots, published, stop)
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	b := x.node(txmq.NodeOptions{Lease: budgetLease(x), Backoff: func(int) time.Duration { return 200 * time.Millisecond }})
	// The batches are stored, then the disturbing clients receive some of them before the
	// listening node asks.
	keys := publishKeys(x, q, b, "budget", batches, 1)
	x.eventually(func() bool { return b.Stats().PublishedMessages >= int64(len(keys)) }, "the batches stored")
	close(published)
	sleep(x.Caps.PollWait)
	listen(x, rec, q, b, func(context.Context, []Msg) error { return errBoom })
	lettered := func() int {
		n := 0
		for _, l := range x.DeadLetters.Letters() {
			n += l.Messages
		}
		return n
	}
	x.eventually(func() bool { return lettered() >= len(keys) }, func() string {
		return fmt.Sprintf("%d of %d messages dead-lettered; runs so far: %s", lettered(), len(keys), rec.Summary())
	})
	close(stop)
	<-done
	x.idle(b)
	sleep(2 * budgetLease(x)) // a run counted wrongly, or a wrong redelivery, would show now
	var bad []string
	for _, k := range keys {
		if n := rec.Count(k); n != budget {
			bad = append(bad, fmt.Sprintf("%s ran %d times", k, n))
		}
	}
	seen := map[string]int{}
	for _, l := range x.DeadLetters.Letters() {
		if l.Reason != core.ReasonDeliveryExhausted || l.Attempts != budget {
			bad = append(bad, fmt.Sprintf("dead letter of batch %s: reason %s after %d attempts (want %s after %d)", l.BatchID, l.Reason, l.Attempts, core.ReasonDeliveryExhausted, budget))
		}
		if env, err := envelope.Decode(l.Body); err == nil {
			for _, m := range env.Messages {
				seen[string(m)]++
			}
		}
	}
	if n := len(x.DeadLetters.Letters()); n != lettered() || lettered() != len(keys) {
		bad = append(bad, fmt.Sprintf("%d dead letters holding %d messages; want one per batch, %d messages", n, lettered(), len(keys)))
	}
	for m, n := range seen {
		if n != 1 {
			bad = append(bad, fmt.Sprintf("message %s in %d dead letters", m, n))
		}
	}
	if len(bad) > 0 {
		x.T.Fatalf("MaxAttempts=%d is not exact (%s): %s", budget, rec.Summary(), strings.Join(limit(bad, 8), "; "))
	}
}

// warmUp makes h ready to fetch slots.Queue (adapters look up or create their queues on first use)
// with a Fetch that does not wait; what it claims is given back.
func warmUp(x *X, h core.Backend, slots core.QueueSlots) {
	claims, _ := h.Fetch(context.Background(), core.FetchRequest{Node: "holder", Lease: budgetLease(x),
		Queues: []core.QueueSlots{slots}})
	giveBack(x, h, claims)
}

// holdOnce asks h for slots (up to 3 batches, one of an Exclusive queue) with a long wait and a ctx that is already
// cancelled: the Fetch returns at once, and an adapter that receives in the background is left
// with its receive outstanding (what it gets is held for a later Fetch). Claims it did return
// are given back.
func holdOnce(x *X, h core.Backend, slots core.QueueSlots) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	claims, _ := h.Fetch(ctx, core.FetchRequest{Node: "holder", Lease: budgetLease(x), Wait: 2 * budgetLease(x),
		Queues: []core.QueueSlots{slots}})
	giveBack(x, h, claims)
}

// giveBack gives claims back the way the engine gives back a run it did not start: Retry with the
// attempt count of the runs before this one and no delay, so that they are not runs either.
func giveBack(x *X, h core.Backend, claims []*core.Claim) {
	for _, c := range claims {
		env, err := envelope.Decode(c.Body)
		if err != nil {
			x.T.Errorf("holder got an undecodable batch %s: %v", c.ID, err)
			continue
		}
		body, err := envelope.ReencodeAttempt(c.Body, env.Attempt+c.Deliveries-1)
		if err != nil {
			x.T.Errorf("re-encoding batch %s: %v", c.ID, err)
			continue
		}
		rctx, rcancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		if err := h.Retry(rctx, c, body, 0); err != nil {
			x.T.Logf("holder: giving back batch %s: %v", c.ID, err)
		}
		rcancel()
	}
}
