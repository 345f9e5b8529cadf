package core

import (
	"errors"
	"fmt"
)

// UniqueStop ends the transaction of a unique publish that stores nothing, as Judge decided:
// the batch itself holds its key (Self: UniqueSelf, stored already) or another batch does
// (Kept, the holder's batch id: UniqueHeld). An adapter returns it from inside the
// transaction, which rolls it back, and passes the transaction's error to UniqueOutcome.
type UniqueStop struct {
	// Self reports that the batch itself holds the key.
	Self bool
	// Kept is the id of the batch that holds the key, when another one does.
	Kept string
}

// Error says which batch holds the key.
func (s *UniqueStop) Error() string {
	if s.Self {
		return "unique key held by the batch itself"
	}
	return "unique key held by batch " + s.Kept
}

// UniqueOutcome is the result of a unique publish to queue with key u whose transaction
// returned err: nil when it committed or stopped because the batch itself holds the key; a
// *UniqueError naming the batch kept when another one holds it; otherwise err, named with the
// key and its mode.
func UniqueOutcome(queue string, u Unique, err error) error {
	var stop *UniqueStop
	switch {
	case err == nil:
		return nil
	case errors.As(err, &stop) && stop.Self:
		return nil
	case stop != nil:
		return &UniqueError{Queue: queue, Key: u.Key, Mode: u.Mode, Kept: stop.Kept}
	}
	return fmt.Errorf("unique key %q (%v): %w", u.Key, u.Mode, err)
}
