package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

var (
	errRateLimited  = errors.New("payment provider: rate limited")
	errCardDeclined = errors.New("payment provider: card declined")
)

// A listener's error can decide its retry: RetryAfter sets the delay of the next run (a
// rate-limited API's Retry-After), Permanent dead-letters the batch now, whatever budget is
// left. A plain error is retried after the queue's Backoff, which overrides the node's.
func ExamplePermanent() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	failed := make(chan struct{})
	charges := txmq.MustDeclareIn(reg, "example-charges", txmq.QueueConfig[string]{
		Transactional: txmq.Never,
		Backoff:       txmq.ExponentialBackoff(10*time.Millisecond, time.Second), // default: the node's
		OnError: func(msgs []string, err error, attempts int) error {
			fmt.Printf("OnError %s: %v (permanent %v, runs %d)\n", msgs[0], err, errors.Is(err, errCardDeclined), attempts)
			close(failed)
			return nil
		},
	})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	var first time.Time
	err = charges.Listen(node, func(ctx context.Context, msgs []string) error {
		if first.IsZero() { // runs of one batch never overlap
			first = time.Now()
			fmt.Println("run 1: rate limited")
			return txmq.RetryAfter(50*time.Millisecond, errRateLimited)
		}
		fmt.Println("run 2 waited the Retry-After:", time.Since(first) >= 50*time.Millisecond)
		return txmq.Permanent(errCardDeclined)
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := charges.Publish(ctx, node, "order-1"); err != nil {
		log.Fatal(err)
	}
	<-failed
	_ = node.Close(ctx)
	fmt.Println("dropped as permanent:", node.Stats().Dropped[txmq.ReasonPermanent])
	// Output:
	// run 1: rate limited
	// run 2 waited the Retry-After: true
	// OnError order-1: payment provider: card declined (permanent true, runs 2)
	// dropped as permanent: 1
}

// A queue's ClassifyError sorts the errors its listener passes on from code it does not own
// (a payment SDK's here) in one place: a declined card can never succeed (Permanent: dead
// letter now), a rate limit waits longer (RetryAfter), anything else keeps the queue's
// Backoff and budget.
func ExampleQueueConfig_classifyError() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	failed := make(chan struct{})
	charges := txmq.MustDeclareIn(reg, "example-classified-charges", txmq.QueueConfig[string]{
		Transactional: txmq.Never,
		ClassifyError: func(err error, run int) error {
			switch {
			case errors.Is(err, errCardDeclined):
				return txmq.Permanent(err)
			case errors.Is(err, errRateLimited):
				return txmq.RetryAfter(20*time.Millisecond*time.Duration(run), err)
			}
			return err
		},
		OnError: func(msgs []string, err error, attempts int) error {
			fmt.Printf("OnError %s after %d runs: %v\n", msgs[0], attempts, err)
			close(failed)
			return nil
		},
	})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	runs := 0
	err = charges.Listen(node, func(ctx context.Context, msgs []string) error {
		runs++ // runs of one batch never overlap
		if runs == 1 {
			return fmt.Errorf("charge %s: %w", msgs[0], errRateLimited) // as the SDK returns it
		}
		return fmt.Errorf("charge %s: %w", msgs[0], errCardDeclined)
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := charges.Publish(ctx, node, "order-2"); err != nil {
		log.Fatal(err)
	}
	<-failed
	_ = node.Close(ctx)
	fmt.Println("dropped as permanent:", node.Stats().Dropped[txmq.ReasonPermanent])
	// Output:
	// OnError order-2 after 2 runs: charge order-2: payment provider: card declined
	// dropped as permanent: 1
}
