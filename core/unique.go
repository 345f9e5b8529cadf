package core

import (
	"errors"
	"fmt"
	"time"
)

// Unique jobs (txmq.QueueConfig.Unique): a message with a unique key (OutgoingBatch.Unique,
// always alone in its batch) is stored only when no earlier batch of its queue holds the key,
// and what "holds" means is the queue's UniqueMode. The check and the store are one atomic step
// of the backend's Publish, on the backend's own state (its rows, keys or records): a publish
// that finds the key held stores nothing and returns a *UniqueError naming the batch that
// holds it (the engine and the outbox count the message as deduplicated, log it, and report
// success to the publisher). A publish that finds its own batch id holding the key (a retried
// flush, a sweep of a row whose first publish landed) returns nil: it is stored already.

// UniqueMode says how long a unique key (OutgoingBatch.Unique) is held after the batch that
// took it was stored. The zero value is "not unique".
type UniqueMode uint8

const (
	// UniqueWindow holds the key for Unique.Window after the publish that took it, whatever
	// happens to that batch: River's ByPeriod, Asynq's Unique(ttl), BullMQ's throttle mode.
	UniqueWindow UniqueMode = iota + 1
	// UniqueUntilStarted holds the key while the batch that took it is stored and has never
	// been handed to a listener by a claim: once a run started, the key is free again.
	UniqueUntilStarted
	// UniqueUntilDone holds the key while the batch that took it is stored, running or waiting
	// for a retry: until it is acked, dropped or dead-lettered (BullMQ's simple mode, River's
	// default ByState).
	UniqueUntilDone
	// UniqueDebounce makes the last publish within Unique.Window win: a publish that finds the
	// key held by a batch never handed out removes that batch and is stored in its place, due
	// Window after this publish (the engine sets the delay); one whose holder already started
	// is stored as a new batch. BullMQ's debounce mode with extend and replace.
	UniqueDebounce
)

// String returns the mode's name as txmq spells it in settings and errors.
func (m UniqueMode) String() string {
	switch m {
	case 0:
		return "none"
	case UniqueWindow:
		return "UniqueWindow"
	case UniqueUntilStarted:
		return "UniqueUntilStarted"
	case UniqueUntilDone:
		return "UniqueUntilDone"
	case UniqueDebounce:
		return "UniqueDebounce"
	}
	return fmt.Sprintf("UniqueMode(%d)", uint8(m))
}

// Valid reports whether m is one of the four modes.
func (m UniqueMode) Valid() bool { return m >= UniqueWindow && m <= UniqueDebounce }

// Unique is a batch's unique key and how the backend holds it (see UniqueMode). A zero Unique
// (Mode 0) is a batch that is not unique.
type Unique struct {
	// Key is the unique key (a caller id, the key of txmq.UniqueKey, or a hash of the message).
	Key string
	// Mode is how long the key is held.
	Mode UniqueMode
	// Window is the hold of UniqueWindow and the quiet time of UniqueDebounce; 0 otherwise.
	Window time.Duration
}

// UniqueKeeper is implemented by adapters that hold unique keys (see the comment at the top of
// this file) with their own state. Called through KeepsUnique by txmq.NewNode, once per unique
// queue; a node refuses a queue whose mode the backend does not keep. The parity group
// "unique" checks it.
type UniqueKeeper interface {
	// KeepsUnique returns nil when the backend, as opened, holds unique keys in mode m, or an
	// error saying why not.
	KeepsUnique(m UniqueMode) error
}

// KeepsUnique reports whether b holds unique keys in mode m: nil when it (or the backend it
// wraps, looking through wrappers with an Unwrap() Backend method) implements UniqueKeeper and
// its KeepsUnique returns nil, else an error wrapping ErrInvalidConfig naming the adapter.
func KeepsUnique(b Backend, m UniqueMode) error {
	outer := b
	for range 16 {
		if k, ok := b.(UniqueKeeper); ok {
			if err := k.KeepsUnique(m); err != nil {
				return fmt.Errorf("%w: backend %T does not keep unique keys in mode %v: %w", ErrInvalidConfig, b, m, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not keep unique keys (core.UniqueKeeper)", ErrInvalidConfig, outer, b)
}

// ErrUniqueHeld marks a publish refused because another batch holds its unique key; the error
// is a *UniqueError. errors.Is(err, ErrDuplicate) is true as well.
var ErrUniqueHeld = errors.New("txmq: unique key held by another batch of the queue")

// UniqueError is a backend's refusal of a unique batch whose key another batch holds: nothing
// was stored.
type UniqueError struct {
	// Queue is the batch's queue, Key its unique key and Mode the queue's mode.
	Queue string
	Key   string
	Mode  UniqueMode
	// Kept is the id of the batch that holds the key (empty when the backend cannot say).
	Kept string
}

// Error names the queue, the key, the mode and the batch kept.
func (e *UniqueError) Error() string {
	return fmt.Sprintf("queue %q: unique key %q is held (%v) by batch %s; the publish was left out", e.Queue, e.Key, e.Mode, e.Kept)
}

// Is makes errors.Is(err, ErrUniqueHeld) and errors.Is(err, ErrDuplicate) true.
func (e *UniqueError) Is(target error) bool { return target == ErrUniqueHeld || target == ErrDuplicate }

// UniqueHolder is what a backend read of the batch that holds a unique key, for Judge.
type UniqueHolder struct {
	// Batch is the holder's batch id.
	Batch string
	// InWindow reports that the key's UniqueWindow hold has not ended.
	InWindow bool
	// Live reports that the holder is still stored: ready, delayed, running or waiting for a
	// retry (not acked, dropped or dead-lettered).
	Live bool
	// Started reports that a claim handed the holder out, or that a retry rewrote it.
	Started bool
}

// UniqueVerdict is what a unique publish does with a key that a UniqueHolder holds (Judge).
type UniqueVerdict uint8

const (
	// UniqueStore: store the batch and give the key to it.
	UniqueStore UniqueVerdict = iota
	// UniqueReplace: remove the holder, a debounced batch never handed out, then store the
	// batch and give the key to it.
	UniqueReplace
	// UniqueSelf: the batch itself holds the key (a retried publish, a sweep of a row whose
	// first publish landed): it is stored already; store nothing and report success.
	UniqueSelf
	// UniqueHeld: another batch holds the key: store nothing and return a *UniqueError.
	UniqueHeld
)

// Judge is the rule every adapter applies, in the step that stores a unique batch id of mode
// m, to the key's current holder h (see UniqueMode for what each mode holds). A key nobody
// holds is UniqueStore without asking.
func (h UniqueHolder) Judge(m UniqueMode, id string) UniqueVerdict {
	var held bool
	switch m {
	case UniqueWindow:
		held = h.InWindow
	case UniqueUntilStarted:
		held = h.Live && !h.Started
	case UniqueUntilDone:
		held = h.Live
	case UniqueDebounce:
		switch {
		case h.Live && h.Batch == id:
			return UniqueSelf
		case h.Live && !h.Started:
			return UniqueReplace
		}
		return UniqueStore
	}
	switch {
	case !held:
		return UniqueStore
	case h.Batch == id:
		return UniqueSelf
	}
	return UniqueHeld
}
