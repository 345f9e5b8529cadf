package engine

import "context"

// Deliveries returns how many times the backend delivered the claim whose listener received
// ctx (core.Claim.Deliveries), and true; false when ctx is not a listener's. The run number
// the policy counts is the envelope's attempt plus it: the app API's run middleware
// (txmq.RunRequest.Attempt) reads it this way rather than through a field of Batch, so
// that a run without middleware pays nothing for it.
func Deliveries(ctx context.Context) (int, bool) {
	r, ok := ctx.Value(leaseKey{}).(*running)
	if !ok {
		return 0, false
	}
	return r.claim.Deliveries, true
}
