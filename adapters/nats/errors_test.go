package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		err         error
		unavailable bool
		rejected    bool
	}{
		{"no responders", natsgo.ErrNoResponders, true, false},
		{"timeout", natsgo.ErrTimeout, true, false},
		{"deadline", context.DeadlineExceeded, true, false},
		{"closed", natsgo.ErrConnectionClosed, true, false},
		{"draining", natsgo.ErrConnectionDraining, true, false},
		{"reconnecting", natsgo.ErrConnectionReconnecting, true, false},
		{"reconnect buffer", natsgo.ErrReconnectBufExceeded, true, false},
		{"no servers", natsgo.ErrNoServers, true, false},
		{"disconnected", fmt.Errorf("status: %w", natsgo.ErrDisconnected), true, false},
		{"no stream response", jetstream.ErrNoStreamResponse, true, false},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, true, false},
		{"503 api error", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true, false},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true, false},
		{"wrapped reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true, false},
		{"not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, false, false},
		{"authorization", natsgo.ErrAuthorization, false, false},
		{"permission", natsgo.ErrPermissionViolation, false, false},
		{"max payload", natsgo.ErrMaxPayload, false, true},
		{"stream not found", jetstream.ErrStreamNotFound, false, false},
		{"message too large", jetstream.ErrStreamMessageExceedsMaximum, false, true},
		{"message too large api error", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum, Description: "message size exceeds maximum allowed"}, false, true},
		{"header too large", &jetstream.APIError{Code: 400, ErrorCode: jsErrCodeHeaderExceedsMaximum, Description: "header size exceeds maximum allowed of 64k"}, false, true},
		{"peer offline", &jetstream.APIError{Code: 400, ErrorCode: jsErrCodeClusterNoPeers, Description: "no suitable peers for placement, peer offline"}, true, false},
		{"too many replicas", &jetstream.APIError{Code: 400, ErrorCode: jsErrCodeClusterNoPeers, Description: "no suitable peers for placement"}, false, false},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: 10003, Description: "bad request"}, false, false},
		{"cancelled", context.Canceled, false, false},
		{"other", errors.New("boom"), false, false},
	}
	for _, tt := range tests {
		err := wrap("publish", "q", tt.err)
		if got := errors.Is(err, core.ErrBackendUnavailable); got != tt.unavailable {
			t.Errorf("%s: unavailable = %v, want %v (%v)", tt.name, got, tt.unavailable, err)
		}
		if got := errors.Is(err, core.ErrRejected); got != tt.rejected {
			t.Errorf("%s: rejected = %v, want %v (%v)", tt.name, got, tt.rejected, err)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: the original error is not in the chain: %v", tt.name, err)
		}
	}
	if wrap("x", "", nil) != nil {
		t.Errorf("wrap(nil) != nil")
	}
	lost := wrap("ack", "q", fmt.Errorf("gone: %w", core.ErrLeaseLost))
	if !errors.Is(lost, core.ErrLeaseLost) || errors.Is(lost, core.ErrBackendUnavailable) {
		t.Errorf("lease lost misclassified: %v", lost)
	}
}
