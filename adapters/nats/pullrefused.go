package nats

import (
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullRefusedPause is how long a pull the consumer could not take waits before the Fetch
// sends it again.
const pullRefusedPause = 50 * time.Millisecond

// refusedPull reports whether err, the error that ended a pull of q, only means that the
// queue's consumer could not take the request at that moment, so that the pull is sent again
// rather than reported: no responders (in a cluster, the consumer's leader subscribes to pull
// requests when it is elected, and the other servers learn of that subscription a moment
// later, so a pull sent through another server right after the consumer was created or moved
// finds no responder; this lasted up to two seconds on a loaded 3-node cluster), or a
// leadership change (the new leader ends the waiting pulls the old one had with a 409). It
// pauses pullRefusedPause first (unless the Backend closes), so that the retries do not spin.
// Refusals that go on for longer than Options.Timeout are reported: the consumer has no
// reachable leader. Any other outcome of a pull ends the grace.
func (be *Backend) refusedPull(q *queueState, err error) bool {
	if !errors.Is(err, natsgo.ErrNoResponders) && !errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
		if q.refusedSince.Load() != 0 {
			q.refusedSince.Store(0)
		}
		return false
	}
	now := time.Now()
	q.refusedSince.CompareAndSwap(0, now.UnixNano())
	if now.Sub(time.Unix(0, q.refusedSince.Load())) > be.opts.Timeout {
		return false
	}
	t := time.NewTimer(pullRefusedPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-be.done:
	}
	return true
}
