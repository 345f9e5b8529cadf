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
	}{
		{"no responders", natsgo.ErrNoResponders, true},
		{"timeout", natsgo.ErrTimeout, true},
		{"deadline", context.DeadlineExceeded, true},
		{"closed", natsgo.ErrConnectionClosed, true},
		{"draining", natsgo.ErrConnectionDraining, true},
		{"reconnecting", natsgo.ErrConnectionReconnecting, true},
		{"reconnect buffer", natsgo.ErrReconnectBufExceeded, true},
		{"no servers", natsgo.ErrNoServers, true},
		{"disconnected", fmt.Errorf("status: %w", natsgo.ErrDisconnected), true},
		{"no stream response", jetstream.ErrNoStreamResponse, true},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, true},
		{"503 api error", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"wrapped reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, false},
		{"authorization", natsgo.ErrAuthorization, false},
		{"permission", natsgo.ErrPermissionViolation, false},
		{"max payload", natsgo.ErrMaxPayload, false},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"message too large", jetstream.ErrStreamMessageExceedsMaximum, false},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: 10003, Description: "bad request"}, false},
		{"cancelled", context.Canceled, false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		err := wrap("publish", "q", tt.err)
		if got := errors.Is(err, core.ErrBackendUnavailable); got != tt.unavailable {
			t.Errorf("%s: unavailable = %v, want %v (%v)", tt.name, got, tt.unavailable, err)
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
