package core

import (
	"context"
	"time"
)

// ClaimFunc makes one claim attempt for a Fetch. It returns the claims it made; next, how
// long until one of the requested queues may have more without a wake-up (a delayed batch
// falling due, a lease running out), negative when it knows of none; and an error, which ends
// the Fetch.
type ClaimFunc func() (claims []*Claim, next time.Duration, err error)

// WaitOptions tell ClaimWait what a Fetch waits on between claim attempts.
type WaitOptions struct {
	// Wait is how long the Fetch may wait in all (FetchRequest.Wait); 0 claims once.
	Wait time.Duration
	// Wake, called after each attempt that claimed nothing, returns the channel that fires
	// (a receive or a close) when a new attempt may find something: the adapter's
	// notification (Pub/Sub, NOTIFY, an in-process signal). Nil, or a nil channel: timers
	// only.
	Wake func() <-chan struct{}
	// Done is closed when the backend closes.
	Done <-chan struct{}
	// Closed returns what the Fetch returns once Done is closed. Nil: an empty result and a
	// nil error.
	Closed func() error
	// LastLook reports, when the wait reaches its end without a wake-up, whether to make one
	// more attempt before returning empty (an adapter whose wake-ups cannot be lost may skip
	// it: the node's next Fetch claims at once). Nil: always.
	LastLook func() bool
	// MinTimer is the shortest timer armed for next, so a clock that does not move (a fake
	// one in tests) or rounding cannot make the loop spin. Default 1 ms.
	MinTimer time.Duration
}

// ClaimWait is the claim-then-wait loop of a Fetch: it calls claim until it returns claims or
// an error, and while it returns nothing waits for the first of a wake-up (o.Wake), the next
// due time claim reported, the end of o.Wait (then one last attempt, see LastLook), ctx's
// cancellation or the backend's close, and tries again. Cancelling ctx ends it with an empty
// result and a nil error, and so does a ctx already done when it starts: claim is only called
// with ctx live, and whatever claim returned is returned, never dropped.
func ClaimWait(ctx context.Context, o WaitOptions, claim ClaimFunc) ([]*Claim, error) {
	var deadline time.Time
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}
	minTimer := o.MinTimer
	if minTimer <= 0 {
		minTimer = time.Millisecond
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if ctx.Err() != nil {
			return []*Claim{}, nil
		}
		claims, next, err := claim()
		if err != nil || len(claims) > 0 || o.Wait <= 0 {
			return claims, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return claims, nil
		}
		sleep, atDeadline := remaining, true
		if next >= 0 && next < remaining {
			sleep, atDeadline = max(next, minTimer), false
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		var wake <-chan struct{}
		if o.Wake != nil {
			wake = o.Wake()
		}
		select {
		case <-wake:
		case <-timer.C:
			if atDeadline {
				if o.LastLook != nil && !o.LastLook() {
					return claims, nil
				}
				deadline = time.Now() // one more attempt, then return
			}
		case <-ctx.Done():
			return claims, nil
		case <-o.Done:
			if o.Closed != nil {
				return nil, o.Closed()
			}
			return claims, nil
		}
	}
}
