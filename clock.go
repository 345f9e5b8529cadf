package txmq

import "time"

// Clock tells time for the publish buffer, the engine and the schedules; tests inject a fake
// one to drive the buffer's window and cap without sleeping, or to bring a daily schedule's
// next tick near (the schedule loop looks at the clock at least once a second).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// MaxClockSkew is the largest difference between any two clocks involved in one delivery (the
// publishing node's, the app database's, the backend's, the consuming node's) that txmq
// documents and tests. Delays never depend on it: a delay travels as a duration relative to
// the publish and each hop measures it on one clock (see OutgoingBatch.Delay), so no backend
// delivers early or late whatever the skew. Only the engine's early-arrival guard (see the package
// doc, "Delays and clocks") relies on it, and only to stay silent on a batch that is on time.
const MaxClockSkew = time.Minute
