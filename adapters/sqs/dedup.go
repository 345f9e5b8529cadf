package sqs

import (
	"errors"

	"github.com/txmq/txmq/core"
)

// errNoDedup is why the Backend does not implement id dedup (see DedupIDs).
var errNoDedup = errors.New("SQS standard queues cannot deduplicate messages, and a FIFO queue's MessageDeduplicationId has a fixed 5-minute window, deduplicates whole messages, and is already the batch id of the Exclusive and Ordered queues' FIFO queues; publish idempotently or deduplicate in the listener")

// DedupIDs implements core.IDDeduper by saying the Backend cannot: a node refuses a queue
// with an IDDedupWindow on SQS, and the parity group "identity" counts dedup as not
// supported here.
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, errNoDedup }
