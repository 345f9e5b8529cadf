package sqs

import "github.com/txmq/txmq/core"

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil. A
// keyed batch lives in its queue's FIFO queue with MessageGroupId = key, so SQS hands out one
// batch of a key at a time, in order (see "Ordering" in the package doc).
func (be *Backend) OrdersKeys() error { return nil }
