// Package ratelimit is the rate-limit feature (QueueConfig.core.RateLimit): an engine.Admitter
// that takes a start token per batch from a core.Limiter before each fetch, so that a
// queue's batches start at most at its rate, cluster-wide when the limiter is shared (the
// outbox's Limits), per node with the in-memory one here.
package ratelimit

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Admitter is the engine.Admitter of rate-limited queues.
type Admitter struct {
	limiter core.Limiter
	e       *engine.Engine
}

// New returns the admitter taking tokens from limiter; nil means the backend's own limiter
// when it has one (core.Limiter), else one of this node alone.
func New(limiter core.Limiter, backend core.Backend) *Admitter {
	if limiter == nil {
		if l, ok := backend.(core.Limiter); ok {
			limiter = l
		} else {
			limiter = &localLimiter{}
		}
	}
	return &Admitter{limiter: limiter}
}

// Attach implements engine.Attacher.
func (a *Admitter) Attach(e *engine.Engine) { a.e = e }

func (a *Admitter) log() *slog.Logger { return a.e.Logger() }

// Admit takes start tokens for the rate-limited queues among specs, wanting want[i] each (the
// queue's cap; one for an Exclusive queue, at most its burst), and returns the tokens got per
// queue name; a queue that got none is left out of the fetch, and the earliest retryIn
// shortens the driver's pause (engine.Admitter).
func (a *Admitter) Admit(ctx context.Context, specs []*engine.Spec, want []int) (got map[string]int, retryIn time.Duration) {
	for i, s := range specs {
		if !rateSet(s.Rate) {
			continue
		}
		if got == nil {
			got = map[string]int{}
		}
		w := want[i] // the queue's cap, Unlimited without one
		switch {
		case s.Exclusive:
			w = 1
		case w <= 0 || w > s.Rate.Burst:
			w = s.Rate.Burst
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		g, wait, err := a.limiter.Take(tctx, s.Name, w, s.Rate)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				a.log().Warn("txmq: taking rate-limit tokens failed; not fetching the queue this round", "queue", s.Name, "error", err)
			}
			g, wait = 0, time.Second
		}
		got[s.Name] = g
		if g == 0 && (retryIn == 0 || wait < retryIn) {
			retryIn = max(wait, time.Millisecond)
		}
	}
	return got, retryIn
}

// Return gives back n unused tokens of spec's queue (engine.Admitter).
func (a *Admitter) Return(ctx context.Context, spec *engine.Spec, n int) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.limiter.Return(rctx, spec.Name, n, spec.Rate); err != nil && ctx.Err() == nil {
		a.log().Warn("txmq: giving back rate-limit tokens failed; the queue runs below its limit for a moment", "queue", spec.Name, "error", err)
	}
}

func rateSet(r core.RateLimit) bool { return r.Batches > 0 }

// perSecond returns the bucket's refill rate in tokens per second.
func perSecond(r core.RateLimit) float64 { return float64(r.Batches) / r.Per.Seconds() }

// localLimiter is a Limiter of one node: token buckets in memory.
type localLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (l *localLimiter) refill(queue string, limit core.RateLimit, now time.Time) *bucket {
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[queue]
	if b == nil {
		b = &bucket{tokens: float64(limit.Burst), at: now}
		l.buckets[queue] = b
	}
	b.tokens = math.Min(float64(limit.Burst), b.tokens+now.Sub(b.at).Seconds()*perSecond(limit))
	b.at = now
	return b
}

func (l *localLimiter) Take(_ context.Context, queue string, want int, limit core.RateLimit) (int, time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(queue, limit, time.Now())
	got := min(want, int(b.tokens))
	b.tokens -= float64(got)
	if got == 0 {
		return 0, time.Duration((1 - b.tokens) / perSecond(limit) * float64(time.Second)), nil
	}
	return got, 0, nil
}

func (l *localLimiter) Return(_ context.Context, queue string, n int, limit core.RateLimit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(queue, limit, time.Now())
	b.tokens = math.Min(float64(limit.Burst), b.tokens+float64(n))
	return nil
}
