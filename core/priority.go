package core

import (
	"fmt"
	"time"
)

// Priorities: a prioritized queue (txmq.QueueConfig.Prioritized) gives each batch a priority
// between MinPriority and MaxPriority, higher first, with aging. The engine turns a batch's
// priority p and its queue's aging step W (txmq.QueueConfig.PriorityAging) into a lead,
// OutgoingBatch.Lead = p*W: the adapter sorts the batch as if it were due Lead earlier than
// it is, and never hands it out before it is truly due. Among ready batches a backend claims
// the one with the earliest "due - Lead" first, so a batch of priority p overtakes the
// batches of lower priority q that became due less than (p-q)*W before it, and no more: a
// batch waits at most (MaxPriority-MinPriority)*W behind batches of higher priority that
// became due after it (the starvation bound), however many keep coming.

const (
	// MinPriority is the lowest priority, and every batch's priority on a queue that is not
	// prioritized.
	MinPriority = 0
	// MaxPriority is the highest priority.
	MaxPriority = 9
	// DefaultPriorityAging is a prioritized queue's aging step W when it sets none: one
	// priority level is worth one second of waiting, so the starvation bound is 9 s.
	DefaultPriorityAging = time.Second
)

// Prioritizer is implemented by adapters that claim the ready batches of a queue in the
// order of their due time minus OutgoingBatch.Lead (see the comment at MinPriority), across
// every node sharing the backend, and that keep a batch's Lead through its retries (Retry)
// and lease expiries. Per-key order (KeyOrderer) comes first: a batch of an ordered queue is
// only claimable once it heads its key, whatever its lead. Nodes refuse a prioritized queue
// on a backend without this capability (see PrioritizesOf). Called through Prioritizes by
// txmq.NewNode, once.
type Prioritizer interface {
	// Prioritizes returns nil when the backend, as opened, honours OutgoingBatch.Lead, or
	// an error saying why not.
	Prioritizes() error
}

// Prioritizes reports whether b honours priorities: nil when it (or the backend it wraps,
// looking through wrappers with an Unwrap() Backend method, as OrdersKeys does) implements
// Prioritizer and its Prioritizes returns nil, else an error wrapping ErrInvalidConfig that
// names the adapter's type.
func Prioritizes(b Backend) error {
	outer := b
	for range 16 {
		if p, ok := b.(Prioritizer); ok {
			if err := p.Prioritizes(); err != nil {
				return fmt.Errorf("%w: backend %T does not honour priorities: %w", ErrInvalidConfig, b, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not implement priorities (core.Prioritizer)", ErrInvalidConfig, outer, b)
}

// ValidPriority reports whether p is between MinPriority and MaxPriority.
func ValidPriority(p int) bool { return p >= MinPriority && p <= MaxPriority }

// PriorityLead is the lead of a batch of priority p on a queue whose aging step is w: p*w,
// 0 for a priority or step out of range.
func PriorityLead(p int, w time.Duration) time.Duration {
	if !ValidPriority(p) || w <= 0 {
		return 0
	}
	return time.Duration(p) * w
}
