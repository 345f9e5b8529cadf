package core

import "fmt"

// String names the claim in errors and logs: batch <ID> of queue "<Queue>", or "nil claim".
func (c *Claim) String() string {
	if c == nil {
		return "nil claim"
	}
	return fmt.Sprintf("batch %s of queue %q", c.ID, c.Queue)
}

// QueueName returns the claim's queue, or "" for a nil claim (an adapter names the queue of a
// bad call with it).
func (c *Claim) QueueName() string {
	if c == nil {
		return ""
	}
	return c.Queue
}
