package nats

import (
	"context"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A JetStream cluster refuses calls for a moment now and then: while a stream's Raft group
// elects a leader nobody answers its subjects, and a server whose JetStream is catching up
// answers 503 "JetStream system temporarily unavailable". A publish made in that moment by a
// node without an outbox is dropped (no_outbox), so the Backend rides such moments out: a call
// that the server certainly did not carry out (notStored) is sent again, and the idempotent
// stream setup and duplicate-window update are sent again on any outage, with backoff, within
// the caller's deadline. A short blip costs latency rather than a lost batch, as a reconnect
// does (Backend.usable).

// Backoff between tries of a refused call: busyWaitMin doubling up to busyWaitMax.
const (
	busyWaitMin = 25 * time.Millisecond
	busyWaitMax = 400 * time.Millisecond
)

// notStored reports whether err proves that JetStream did not store the message sent, so that
// sending it again cannot store it twice: no responder took the request (no stream leader right
// now), or the server answered 503 (JetStream or the stream temporarily unavailable) other
// than "not enabled for the account", a configuration problem. A timeout proves nothing (the
// message may be stored and its ack lost), so it is not retried here.
func notStored(err error) bool {
	if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503 && apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount
}

// retryBusy runs call until it succeeds, fails with an error that retryable refuses, or the
// next try would begin past deadline (or ctx ends, or the Backend closes); it returns call's
// last error. Each try waits twice as long as the one before, from busyWaitMin to busyWaitMax.
func (be *Backend) retryBusy(ctx context.Context, deadline time.Time, retryable func(error) bool, call func() error) error {
	wait := busyWaitMin
	for {
		err := call()
		if err == nil || !retryable(err) || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-be.done:
			t.Stop()
			return err
		}
		wait = min(2*wait, busyWaitMax)
	}
}

// busyDeadline is how long retryBusy may go on: ctx's deadline, or patience from now when ctx
// has none or a later one.
func busyDeadline(ctx context.Context, patience time.Duration) time.Time {
	d := time.Now().Add(patience)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}
