package engine

import (
	"time"

	"github.com/txmq/txmq/core"
)

// The driver's side of the Admitter extension point (rate limit): the starts granted for a
// fetch are held until it returns, and what it did not use is given back.

// admit asks the Admitter, if any, how many batches of each of specs may start (want[i]:
// its free slots); see Admitter. Called outside dr.mu.
func (dr *driver) admit(specs []*Spec, want []int) (map[string]int, time.Duration) {
	n := dr.e
	if n.admitter == nil {
		return nil, 0
	}
	return n.admitter.Admit(n.stopCtx, specs, want)
}

// returnTokens gives back the starts granted for a fetch that its claims did not use.
func (dr *driver) returnTokens(granted map[string]int, claimed map[string]int) {
	n := dr.e
	for queue, g := range granted {
		unused := g - claimed[queue]
		if unused <= 0 {
			continue
		}
		if s := n.specs.Lookup(queue); s != nil {
			n.admitter.Return(n.stopCtx, s, unused)
		}
	}
}

// holdTokens keeps the tokens req asks for (what a fetch may start) until the fetch returns,
// and gives back at once those its queues could not use (busy slots, a cap). Driver only.
func (dr *driver) holdTokens(granted map[string]int, req core.FetchRequest) {
	if granted == nil {
		dr.tokens = nil
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
	dr.returnTokens(granted, used)
	dr.tokens = used
}

// releaseTokens gives back the held tokens the fetch's claims did not use. Driver only.
func (dr *driver) releaseTokens(claims []*core.Claim) {
	if dr.tokens == nil {
		return
	}
	claimed := make(map[string]int, len(dr.tokens))
	for _, c := range claims {
		claimed[c.Queue]++
	}
	dr.returnTokens(dr.tokens, claimed)
	dr.tokens = nil
}

// idlePause is how long the driver waits when no queue can be fetched: PollWait, or less when
// a rate-limited queue's next token comes sooner.
func (dr *driver) idlePause() time.Duration {
	n := dr.e
	if dr.tokenWait > 0 {
		return min(n.opts.PollWait, dr.tokenWait)
	}
	return n.opts.PollWait
}
