package txmq

import (
	"math/rand/v2"
	"time"
)

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	span := int64(d) / 5
	if span == 0 {
		return d
	}
	return d - time.Duration(span) + time.Duration(rand.Int64N(2*span+1))
}
