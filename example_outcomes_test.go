package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// Charge is a message of the outcomes example.
type Charge struct {
	ID   string `json:"id"`
	Card string `json:"card"`
}

var (
	errCardExpired = errors.New("card expired")
	errDuplicate   = errors.New("already charged")
)

// A listener reports an outcome per message with Results: one message of a batch can be
// retried (its budget spent), snoozed (its budget not spent), dropped to the dead letters now,
// or discarded, while the others are done. Each group takes its own path; the done ones never
// run again.
func ExampleNewResults() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	var mu sync.Mutex
	var log1 []string
	note := func(s string) { mu.Lock(); log1 = append(log1, s); mu.Unlock() }
	finished := make(chan struct{})
	invoices := txmq.MustDeclareIn(reg, "example-invoices", txmq.QueueConfig[Charge]{
		Transactional: txmq.Never,
		MaxAttempts:   2,
		Backoff:       func(int) time.Duration { return 10 * time.Millisecond },
		OnError: func(msgs []Charge, err error, attempts int) error {
			note(fmt.Sprintf("OnError %s after %d run(s): %v", msgs[0].ID, attempts, err))
			return nil
		},
	})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	runs := map[string]int{}
	var once sync.Once
	charge := func(inv Charge) error {
		mu.Lock()
		runs[inv.ID]++
		n := runs[inv.ID]
		mu.Unlock()
		switch inv.Card {
		case "expired":
			return errCardExpired
		case "dup":
			return errDuplicate
		case "busy":
			if n < 3 { // the provider is busy twice, then takes it
				return txmq.RetryAfter(20*time.Millisecond, errors.New("rate limited"))
			}
		case "flaky":
			return errors.New("timeout")
		}
		return nil
	}
	err = invoices.Listen(node, func(ctx context.Context, msgs []Charge) error {
		res := txmq.NewResults(msgs) // every message done unless marked
		for i, inv := range msgs {
			var ra *txmq.RetryAfterError
			switch err := charge(inv); {
			case errors.Is(err, errCardExpired):
				res.Drop(i, err) // dead letter now: no retry can fix it
			case errors.Is(err, errDuplicate):
				res.Discard(i, "duplicate") // done, no retry, counted
			case errors.As(err, &ra):
				res.Snooze(i, ra.Delay) // again after the delay, budget not spent
			case err != nil:
				res.Retry(i, err) // the backoff, one run of the budget spent
			default:
				note("charged " + inv.ID)
			}
		}
		mu.Lock()
		if runs["inv-5"] == 2 && runs["inv-3"] == 3 {
			once.Do(func() { close(finished) })
		}
		mu.Unlock()
		return res.Err() // nil when every message is done
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	err = invoices.PublishMany(ctx, node, []Charge{{"inv-1", "ok"}, {"inv-2", "expired"}, {"inv-3", "busy"}, {"inv-4", "dup"}, {"inv-5", "flaky"}})
	if err != nil {
		log.Fatal(err)
	}
	<-finished
	_ = node.Close(ctx)
	sort.Strings(log1)
	fmt.Println(strings.Join(log1, "\n"))
	fmt.Println("runs:", runs["inv-1"], runs["inv-2"], runs["inv-3"], runs["inv-4"], runs["inv-5"])
	s := node.Stats()
	fmt.Println("dead letters:", s.Dropped[txmq.ReasonPermanent], "permanent,", s.Dropped[txmq.ReasonDeliveryExhausted], "exhausted; discarded:", s.Dropped[txmq.ReasonDiscarded], "; snoozed:", s.Snoozed)
	// Output:
	// OnError inv-2 after 1 run(s): card expired
	// OnError inv-5 after 2 run(s): timeout
	// charged inv-1
	// charged inv-3
	// runs: 1 1 3 1 2
	// dead letters: 1 permanent, 1 exhausted; discarded: 1 ; snoozed: 2
}

// A one-message listener keeps its one-liners: Snooze runs the batch again later without
// spending its budget, Discard ends it without a dead letter, Permanent dead-letters it.
func ExampleSnooze() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	done := make(chan struct{})
	reports := txmq.MustDeclareIn(reg, "example-reports", txmq.QueueConfig[string]{Transactional: txmq.Never, MaxAttempts: 1})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	run := 0
	err = reports.Listen(node, func(ctx context.Context, msgs []string) error {
		run++
		if run < 3 {
			fmt.Println("run", run, "data not ready: snooze")
			return txmq.Snooze(20 * time.Millisecond)
		}
		fmt.Println("run", run, "built", msgs[0])
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := reports.Publish(ctx, node, "daily"); err != nil {
		log.Fatal(err)
	}
	<-done
	_ = node.Close(ctx)
	// Output:
	// run 1 data not ready: snooze
	// run 2 data not ready: snooze
	// run 3 built daily
}
