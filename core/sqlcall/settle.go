package sqlcall

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/txmq/txmq/core"
)

// Settlement is the bookkeeping of one claim an adapter handed out: its settles and lease
// extensions run one at a time, and once it is settled later ones do nothing. An adapter
// embeds it in its claim handle; the zero value is ready.
type Settlement struct {
	mu      sync.Mutex // serialises settles and extensions of this claim
	settled atomic.Bool
}

// MarkSettled marks the claim settled: a grouped statement that deleted its row calls it once
// the statement succeeded as a whole.
func (s *Settlement) MarkSettled() { s.settled.Store(true) }

// Usable returns the error of a call made after Close (op names the call), or nil.
func (r *Runner) Usable(op string) error {
	if r.Closed.Load() {
		return fmt.Errorf("%s: %s: the backend was closed; open a new one: %w", r.Name, op, core.ErrClosed)
	}
	return nil
}

// Settle runs apply for claim c, one at a time per claim, and does nothing for a claim already
// settled. apply's error is explained (Explain, naming op and c); its false result (no row
// matched the claim's id, token and a live lease) becomes an error wrapping
// core.ErrLeaseLost. With settles, a successful apply marks the claim settled (Ack, Retry,
// Drop; not an extension).
func (r *Runner) Settle(s *Settlement, op string, c *core.Claim, settles bool, apply func() (held bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled.Load() {
		return nil
	}
	held, err := apply()
	if err != nil {
		return r.Explain(op+" "+c.String(), err)
	}
	if !held {
		return fmt.Errorf("%s: %s %s (delivery %d): the lease ran out or the batch was handed out again, and it may already run elsewhere; do not settle it again: %w",
			r.Name, op, c.String(), c.Deliveries, core.ErrLeaseLost)
	}
	if settles {
		s.settled.Store(true)
	}
	return nil
}
