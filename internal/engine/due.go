package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/internal/envelope"
)

// earlyAllowance is how far before its due time, by this node's clock, a batch may arrive and
// still run: the publishing node's clock and this one may each be MaxClockSkew from the
// backend's, so up to twice that apart. A batch that arrives earlier than that was certainly
// delivered early by the backend (the adapter broke its contract), whatever the skew.
const earlyAllowance = 2 * MaxClockSkew

// notYetDue is the engine's guard against a backend that hands out a delayed batch before it is
// due. Adapters schedule delays on the backend's clock (see OutgoingBatch.Delay), so this
// guard never fires with a correct adapter. The batch's due time (Envelope.Due) is on the
// publishing node's clock and is compared with this node's, two clocks that may be up to
// earlyAllowance apart; so the guard stays silent inside that allowance (it cannot tell an
// early batch from skew there) and, when it fires, gives the batch back for what is left plus
// the allowance, which can only make it late, never early. A batch given back did not run:
// its attempt count is unchanged (the give-back is not a run) and no listener, backoff,
// OnError or dead letter is involved. It reports whether the batch was given back.
func (n *Engine) notYetDue(r *running, d *Batch) bool {
	if d.Due.IsZero() {
		return false
	}
	left := d.Due.Sub(n.clock.Now())
	if left <= earlyAllowance {
		return false
	}
	c := r.claim
	wait := left + earlyAllowance
	runs := d.Attempt + c.Deliveries - 1 // this delivery is not a run
	body, err := envelope.ReencodeAttempt(c.Body, runs)
	if err != nil { // cannot happen: the body decoded a moment ago
		body = c.Body
	}
	n.stats.early.Add(1)
	n.log.Warn("txmq: the backend delivered a batch before its due time (beyond the clock-skew allowance); given back without a run (an adapter bug: report it)",
		"queue", c.Queue, "batch", d.ID, "due", d.Due, "early_by", left.Round(time.Millisecond), "allowance", earlyAllowance, "retry_in", wait.Round(time.Millisecond))
	n.settleErr(c, "give-back", n.settle(r, "Retry", func(ctx context.Context) error { return n.backend.Retry(ctx, c, body, wait) }))
	return true
}
