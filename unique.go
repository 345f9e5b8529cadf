package txmq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// UniqueMode says how long a unique key keeps a second publish with the same key out (see
// Unique). It is core.UniqueMode; the zero value is "not unique".
type UniqueMode = core.UniqueMode

// The unique modes (see "Unique jobs" in docs/guide.md).
const (
	// UniqueWindow: a publish is left out while an earlier publish of its key is younger
	// than Unique.Window, whatever became of it (River's ByPeriod, Asynq's Unique(ttl),
	// BullMQ's throttle).
	UniqueWindow = core.UniqueWindow
	// UniqueUntilStarted: a publish is left out while the earlier batch of its key is stored
	// and no run of it has started; once a listener got it, the key is free again.
	UniqueUntilStarted = core.UniqueUntilStarted
	// UniqueUntilDone: a publish is left out while the earlier batch of its key is stored:
	// waiting, running or waiting for a retry, until it is acked, dropped or dead-lettered
	// (BullMQ's simple mode, River's default ByState).
	UniqueUntilDone = core.UniqueUntilDone
	// UniqueDebounce: every publish is due Unique.Window after it is made, and replaces the
	// earlier batch of its key that has not started yet, so the last publish within the
	// window wins and runs once the key stayed quiet for Window (BullMQ's debounce with
	// extend and replace). Not on an Ordered queue (a replace would reorder the key).
	UniqueDebounce = core.UniqueDebounce
)

// Unique makes a queue's publishes unique by key (QueueConfig.Unique). A message's key is,
// first found: its publish's UniqueKey option; with ByPayload a hash of its JSON (River's
// ByArgs); its caller id (ID, IDs). A message with none of them is not checked. The backend
// checks the key when the message reaches it (the flush, or the outbox's relay and sweep
// for a RunInTx/WithTx publish), in one atomic step with the store, on its own state; a
// message whose key is held is left out: the publish call still returns nil (it never waits
// for the backend), the message is counted in Stats.Deduplicated and logged at info with the
// batch that holds the key. Each unique message is stored in a batch of its own.
type Unique struct {
	// Mode is how long a key is held: UniqueWindow, UniqueUntilStarted, UniqueUntilDone or
	// UniqueDebounce; zero (the default) is not unique.
	Mode UniqueMode
	// Window is UniqueWindow's hold and UniqueDebounce's quiet time (at least 1ms); it must
	// be 0 for the other modes.
	Window time.Duration
	// ByPayload keys a message without UniqueKey by the SHA-256 of its JSON (hex), so that
	// two publishes of equal values are one.
	ByPayload bool
}

// UniqueKey gives the message of a publish call its unique key on a queue with Unique: a
// second publish with the key is left out while the first holds it (see Unique). A key is 1
// to core.MaxKeyBytes (128) bytes of printable ASCII without spaces. A call with more than
// one message, or a queue without Unique, is an error naming the queue.
func UniqueKey(key string) PublishOption {
	return func(o *publishOptions) { o.uniqueKey, o.uniqueSet = key, true }
}

// checkUniqueConfig refuses a Unique that is not one of the modes with its window, or that
// meets a setting it cannot keep its promise with.
func checkUniqueConfig(name string, u Unique, ordered bool, idWindow time.Duration) error {
	switch {
	case u.Mode == 0 && (u.Window != 0 || u.ByPayload):
		return fmt.Errorf("%w: queue %q: Unique has a Window or ByPayload but no Mode; set Mode (UniqueWindow, UniqueUntilStarted, UniqueUntilDone or UniqueDebounce) or leave Unique empty", core.ErrInvalidConfig, name)
	case u.Mode == 0:
		return nil
	case !u.Mode.Valid():
		return fmt.Errorf("%w: queue %q: Unique.Mode %v is not one of UniqueWindow, UniqueUntilStarted, UniqueUntilDone, UniqueDebounce", core.ErrInvalidConfig, name, u.Mode)
	case (u.Mode == UniqueWindow || u.Mode == UniqueDebounce) && u.Window < time.Millisecond:
		return fmt.Errorf("%w: queue %q: Unique.Mode %v needs a Window of at least 1ms, got %v", core.ErrInvalidConfig, name, u.Mode, u.Window)
	case (u.Mode == UniqueUntilStarted || u.Mode == UniqueUntilDone) && u.Window != 0:
		return fmt.Errorf("%w: queue %q: Unique.Mode %v holds a key by the batch's state, not for a time; drop Window (%v), or use UniqueWindow", core.ErrInvalidConfig, name, u.Mode, u.Window)
	case u.Mode == UniqueDebounce && ordered:
		return fmt.Errorf("%w: queue %q is Ordered: UniqueDebounce would replace a batch inside its key's order; use another mode, or a queue that is not Ordered", core.ErrInvalidConfig, name)
	case idWindow > 0:
		return fmt.Errorf("%w: queue %q sets both IDDedupWindow and Unique; Unique with Mode UniqueWindow deduplicates caller ids the same way: keep one", core.ErrInvalidConfig, name)
	}
	return nil
}

// setUnique gives each encoded message of a publish call its unique key (core.Message.Unique)
// on a unique queue, and returns the call's due time (a debounce's is Window from now unless
// a later one was asked for); an error for UniqueKey on a queue without Unique, on a call of
// several messages, or not a valid key.
func setUnique(spec *queueSpec, o publishOptions, msgs []core.Message, due time.Time, now func() time.Time) (time.Time, error) {
	u := spec.Unique
	switch {
	case u.Mode == 0 && o.uniqueSet:
		return due, fmt.Errorf("%w: queue %q has no Unique mode, so txmq.UniqueKey(%q) would promise a check that is not made; declare the queue with Unique, or drop the key", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.uniqueKey), 40))
	case u.Mode == 0:
		return due, nil
	case o.uniqueSet && len(msgs) != 1:
		return due, fmt.Errorf("%w: queue %q: txmq.UniqueKey(%q) on a call of %d messages would key them all alike; publish them one by one, or give each an id (IDs)", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.uniqueKey), 40), len(msgs))
	case o.uniqueSet && !core.ValidKey(o.uniqueKey):
		return due, fmt.Errorf("%w: queue %q: unique key %q is not 1 to %d bytes of printable ASCII without spaces; hash it (for example hex of SHA-256)", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.uniqueKey), 40), core.MaxKeyBytes)
	}
	keyed := false
	for i := range msgs {
		switch {
		case o.uniqueSet:
			msgs[i].Unique = o.uniqueKey
		case spec.uniqueByPayload:
			sum := sha256.Sum256(msgs[i].Body)
			msgs[i].Unique = hex.EncodeToString(sum[:])
		case o.ids != nil:
			msgs[i].Unique = msgs[i].ID
		}
		keyed = keyed || msgs[i].Unique != ""
	}
	if keyed && u.Mode == UniqueDebounce {
		if d := now().Add(u.Window); d.After(due) {
			due = d
		}
	}
	return due, nil
}
