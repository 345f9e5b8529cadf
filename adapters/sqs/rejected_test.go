package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// TestServerRefusalIsRejected: a message SQS itself refuses as too large (the adapter's
// MaxMessageBytes set above the server's limit, no overflow store) is a permanent refusal
// (core.ErrRejected), never an outage that would stop an outbox sweep at that row.
func TestServerRefusalIsRejected(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	be := s.client(t, &Options{MaxMessageBytes: 8 << 20})
	be.opts.Overflow = nil
	err := be.Publish(context.Background(), parity.EncodeBatch("huge", []string{"x"}, json.RawMessage(strconv.Quote(randomString(3<<20)))))
	if !errors.Is(err, core.ErrRejected) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("a 3 MiB message the server refuses: %v; want core.ErrRejected and not core.ErrBackendUnavailable", err)
	}
}
