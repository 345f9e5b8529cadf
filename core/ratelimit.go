package core

import (
	"context"
	"time"
)

// RateLimit caps how many batches of a queue start per period: a token bucket that holds at
// most Burst tokens and gains Batches tokens per Per; starting a batch takes one.
type RateLimit struct {
	// Batches is how many batches may start per Per.
	Batches int
	// Per is the period. With Batches, it sets the rate: 20 per second is {20, time.Second}.
	Per time.Duration
	// Burst is how many batches may start at once after an idle spell. Default Batches.
	Burst int
}

// Limiter hands out the start tokens of rate-limited queues. Nodes that share one share each
// queue's limit cluster-wide: the outbox's store is one (a row per queue in the app database),
// and an adapter may implement it too (a node uses NodeOptions.Limiter first, then its
// backend if that is a Limiter, then a limiter of its own).
type Limiter interface {
	// Take takes up to want tokens of queue's bucket and returns how many it got and, when it
	// got none, how long until the next token.
	Take(ctx context.Context, queue string, want int, limit RateLimit) (got int, retryIn time.Duration, err error)
	// Return gives back n tokens taken but not used (the fetch found fewer batches).
	Return(ctx context.Context, queue string, n int, limit RateLimit) error
}
