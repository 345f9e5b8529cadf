package core

import "time"

// ApproximateDepths is implemented by adapters whose Depths are approximate counts that may lag
// behind what the backend holds (SQS's ApproximateNumberOfMessages* attributes). Code that
// concludes from Depths that a queue is empty (the drain wrapper, before it stops polling an
// old backend or lets the new backend run an Exclusive queue) trusts zeros from such a backend
// only after reading them continuously for at least DepthsSettle, and for at least one lease
// (visibility timeout), so that a batch in flight that was not counted has either finished or
// become visible again. An adapter without the method reports exact counts.
type ApproximateDepths interface {
	// DepthsSettle returns how long Depths may lag behind the backend's state.
	DepthsSettle() time.Duration
}

// DepthsSettle returns the DepthsSettle of b (0 when its Depths are exact), looking through
// wrappers that expose the backend they wrap with an Unwrap() Backend method.
func DepthsSettle(b Backend) time.Duration {
	for range 16 { // wrappers nest a few levels at most; a cycle must not hang
		if a, ok := b.(ApproximateDepths); ok {
			return max(a.DepthsSettle(), 0)
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return 0
		}
		b = u.Unwrap()
	}
	return 0
}
