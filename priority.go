package txmq

import (
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// Priority gives the messages of a publish call a priority on a Prioritized queue, from
// MinPriority (0) to MaxPriority (9), higher first, instead of the queue's DefaultPriority.
// Publishes of different priorities never share a batch. The priority travels with the batch
// through the outbox, retries, a dead letter's replay and a drain. On a queue that is not
// Prioritized, or out of range, it is an error naming the queue. See "Priorities" in the
// package doc for the aging that keeps low priorities from starving.
func Priority(p int) PublishOption {
	return func(o *publishOptions) { o.priority, o.prioSet = p, true }
}

// The priority range, the same on every backend that honours priorities (core.Prioritizer).
const (
	// MinPriority is the lowest priority (and the default of a prioritized queue).
	MinPriority = core.MinPriority
	// MaxPriority is the highest priority.
	MaxPriority = core.MaxPriority
)

// publishPriority returns a publish call's priority: its Priority option or the queue's
// DefaultPriority on a prioritized queue, MinPriority otherwise; an error for a priority on a
// queue that is not prioritized, or out of range.
func publishPriority(spec *queueSpec, o publishOptions) (int, error) {
	switch {
	case !spec.Prioritized && o.prioSet:
		return 0, fmt.Errorf("%w: queue %q is not Prioritized, so txmq.Priority(%d) would promise an order it does not keep; declare the queue with Prioritized: true, or drop the priority", core.ErrInvalidConfig, spec.Name, o.priority)
	case !spec.Prioritized:
		return core.MinPriority, nil
	case !o.prioSet:
		return spec.DefaultPriority, nil
	case !core.ValidPriority(o.priority):
		return 0, fmt.Errorf("%w: queue %q: priority %d is out of range; use %d (lowest) to %d (highest)", core.ErrInvalidConfig, spec.Name, o.priority, core.MinPriority, core.MaxPriority)
	}
	return o.priority, nil
}

// checkPriorityConfig checks a queue's priority settings at declaration.
func checkPriorityConfig(name string, prioritized bool, aging time.Duration, def int) error {
	switch {
	case !prioritized && (aging != 0 || def != 0):
		return fmt.Errorf("%w: queue %q: PriorityAging or DefaultPriority is set without Prioritized; set Prioritized: true, or drop them", core.ErrInvalidConfig, name)
	case aging < 0 || aging > 0 && aging < time.Millisecond:
		return fmt.Errorf("%w: queue %q: PriorityAging is %v; use at least 1ms, or 0 for the default %v", core.ErrInvalidConfig, name, aging, core.DefaultPriorityAging)
	case aging > 24*time.Hour:
		return fmt.Errorf("%w: queue %q: PriorityAging is %v; use at most 24h (the starvation bound is %d times it)", core.ErrInvalidConfig, name, aging, core.MaxPriority-core.MinPriority)
	case !core.ValidPriority(def):
		return fmt.Errorf("%w: queue %q: DefaultPriority %d is out of range; use %d (lowest) to %d (highest)", core.ErrInvalidConfig, name, def, core.MinPriority, core.MaxPriority)
	}
	return nil
}

// priorityAging is a queue's aging step, defaulted; 0 when the queue is not prioritized.
func priorityAging(prioritized bool, aging time.Duration) time.Duration {
	switch {
	case !prioritized:
		return 0
	case aging == 0:
		return core.DefaultPriorityAging
	}
	return aging
}
