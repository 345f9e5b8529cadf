package engine

import (
	"context"

	"math"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

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

// takeTokens takes start tokens for the rate-limited queues among specs, wanting want[i] each
// (the queue's cap; one for an Exclusive queue, at most its burst), and returns the tokens got per queue name; a queue that got none is left out of the
// fetch, and the earliest retryIn shortens the driver's pause. Called outside n.mu.
func (n *Engine) takeTokens(specs []*Spec, want []int) (got map[string]int, retryIn time.Duration) {
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
		ctx, cancel := context.WithTimeout(n.stopCtx, 5*time.Second)
		g, wait, err := n.limiter.Take(ctx, s.Name, w, s.Rate)
		cancel()
		if err != nil {
			if n.stopCtx.Err() == nil {
				n.log.Warn("txmq: taking rate-limit tokens failed; not fetching the queue this round", "queue", s.Name, "error", err)
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

// returnTokens gives back the tokens of req's rate-limited queues that its claims did not use.
func (n *Engine) returnTokens(granted map[string]int, claimed map[string]int) {
	for queue, g := range granted {
		unused := g - claimed[queue]
		if unused <= 0 {
			continue
		}
		s := n.specs.Lookup(queue)
		if s == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(n.stopCtx, 5*time.Second)
		if err := n.limiter.Return(ctx, queue, unused, s.Rate); err != nil && n.stopCtx.Err() == nil {
			n.log.Warn("txmq: giving back rate-limit tokens failed; the queue runs below its limit for a moment", "queue", queue, "error", err)
		}
		cancel()
	}
}

// holdTokens keeps the tokens req asks for (what a fetch may start) until the fetch returns,
// and gives back at once those its queues could not use (busy slots, a cap). Driver only.
func (n *Engine) holdTokens(granted map[string]int, req core.FetchRequest) {
	if granted == nil {
		n.tokens = nil
		return
	}
	used := make(map[string]int, len(granted))
	for _, q := range req.Queues {
		if g, ok := granted[q.Queue]; ok {
			used[q.Queue] = min(g, q.Free)
			if q.Free == core.Unlimited {
				used[q.Queue] = g
			}
		}
	}
	n.returnTokens(granted, used)
	n.tokens = used
}

// releaseTokens gives back the held tokens the fetch's claims did not use. Driver only.
func (n *Engine) releaseTokens(claims []*core.Claim) {
	if n.tokens == nil {
		return
	}
	claimed := make(map[string]int, len(n.tokens))
	for _, c := range claims {
		claimed[c.Queue]++
	}
	n.returnTokens(n.tokens, claimed)
	n.tokens = nil
}

// idlePause is how long the driver waits when no queue can be fetched: PollWait, or less when
// a rate-limited queue's next token comes sooner.
func (n *Engine) idlePause() time.Duration {
	if n.tokenWait > 0 {
		return min(n.opts.PollWait, n.tokenWait)
	}
	return n.opts.PollWait
}
