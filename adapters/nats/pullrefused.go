package nats

import (
	"context"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullRefusedPause is how long a pull the consumer could not take waits before the Fetch
// sends it again.
const pullRefusedPause = 50 * time.Millisecond

// refusedPull reports whether err, the error that ended a pull of lane l's consumer cons, only
// means that the consumer could not take the request at that moment, so that the pull is sent
// again rather than reported: no responders (in a cluster, the consumer's leader subscribes to
// pull requests when it is elected, and the other servers learn of that subscription a moment
// later, so a pull sent through another server right after the consumer was created or moved
// finds no responder; this lasted up to two seconds on a loaded 3-node cluster), or a
// leadership change (the new leader ends the waiting pulls the old one had with a 409). It
// applies to every lane alike: the main lane and each key partition's.
//
// No responders also means a consumer that is gone (deleted, or a key partition's in-memory
// consumer lost to a server restart), so the first refusal of a run sets the lane's consumer
// up again (looked up, or created with the settings it had; see renewConsumer): a consumer
// that only had no leader yet is found, a lost one is made again, and either way the pull is
// sent again. A refusal whose renewal fails is reported. It pauses pullRefusedPause first
// (unless the Backend closes), so that the retries do not spin. Refusals that go on for longer
// than Options.Timeout are reported: the consumer has no reachable leader. Any other outcome
// of a pull ends the run.
func (be *Backend) refusedPull(l *lane, cons jetstream.Consumer, err error) bool {
	noResponders := errors.Is(err, natsgo.ErrNoResponders)
	if !noResponders && !errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
		if l.refusedSince.Load() != 0 {
			l.refusedSince.Store(0)
		}
		return false
	}
	now := time.Now()
	first := l.refusedSince.CompareAndSwap(0, now.UnixNano())
	if now.Sub(time.Unix(0, l.refusedSince.Load())) > be.opts.Timeout {
		return false
	}
	if first && noResponders {
		if be.renewConsumer(l, cons) != nil {
			return false
		}
	}
	t := time.NewTimer(pullRefusedPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-be.done:
	}
	return true
}

// renewConsumer forgets the lane's consumer if it is still cons, and sets it up again with
// the exclusivity and AckWait it had (see consumer), within Options.Timeout per call, cut
// short by Close.
func (be *Backend) renewConsumer(l *lane, cons jetstream.Consumer) error {
	l.consMu.Lock()
	exclusive, ackWait := l.exclusive, l.ackWait
	if l.cons == cons {
		l.cons = nil
	}
	l.consMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-be.done:
			cancel()
		case <-stop:
		}
	}()
	_, _, err := be.consumer(ctx, l, exclusive, ackWait)
	return err
}
