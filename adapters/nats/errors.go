package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// This file is the one place where nats.go and JetStream errors are classified. Every error the
// Backend returns goes through wrap, which adds the operation and queue and, for errors that
// mean "the server cannot be reached or cannot serve right now", wraps
// core.ErrBackendUnavailable so the outbox sweep and the node's fetch loop back off and retry.

// unavailableErrs are nats.go and JetStream sentinels that mean a transient outage: the
// connection is down, reconnecting, draining or closed, a request timed out or had no
// responder (no JetStream on the other end yet: a server still starting, a leader election),
// or the JetStream subsystem is not (yet) enabled.
var unavailableErrs = []error{
	natsgo.ErrNoResponders,
	natsgo.ErrTimeout,
	natsgo.ErrConnectionClosed,
	natsgo.ErrConnectionDraining,
	natsgo.ErrConnectionReconnecting,
	natsgo.ErrReconnectBufExceeded,
	natsgo.ErrNoServers,
	natsgo.ErrDisconnected,
	natsgo.ErrStaleConnection,
	jetstream.ErrNoStreamResponse,
	jetstream.ErrNoHeartbeat,
	jetstream.ErrServerShutdown,
	jetstream.ErrJetStreamNotEnabled,
	jetstream.ErrAsyncPublishTimeout,
	context.DeadlineExceeded,
	io.EOF,
	io.ErrUnexpectedEOF,
	syscall.ECONNREFUSED,
	syscall.ECONNRESET,
	syscall.EPIPE,
}

// jsErrCodeHeaderExceedsMaximum is the server's JSStreamHeaderExceedsMaximumErr ("header size
// exceeds maximum allowed of 64k"), which nats.go has no constant for.
const jsErrCodeHeaderExceedsMaximum jetstream.ErrorCode = 10097

// jsErrCodeClusterNoPeers is the server's JSClusterNoPeersErr ("no suitable peers for
// placement", with the reasons appended), which nats.go has no constant for.
const jsErrCodeClusterNoPeers jetstream.ErrorCode = 10005

// isRejected reports whether err refuses a message permanently, whatever the server's health:
// a message over the connection's max_payload (the adapter chunks bodies, so this means a
// server whose max_payload shrank under a running client) or over the stream's max_msg_size or
// header limit. Chunking cannot fix these; retrying the same batch never succeeds.
func isRejected(err error) bool {
	if errors.Is(err, natsgo.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum || apiErr.ErrorCode == jsErrCodeHeaderExceedsMaximum
	}
	return false
}

// isUnavailable reports whether err means the backend is temporarily unreachable or unable to
// serve. Configuration and permission problems (no JetStream for the account, authorization,
// bad stream config, message too large) are not: retrying them would not help.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range unavailableErrs {
		if errors.Is(err, target) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: "JetStream system temporarily unavailable", no quorum, no leader. But a 503 for
		// "not enabled for account" is a configuration problem.
		if apiErr.ErrorCode == jsErrCodeClusterNoPeers && strings.Contains(apiErr.Description, "peer offline") {
			// Too few servers online to place the replicas asked for: a node is down, or the
			// meta leader has not heard from it yet. Replicas beyond the cluster's size get the
			// same code without "peer offline": a configuration problem.
			return true
		}
		return apiErr.Code == 503 && apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// wrap returns err with the operation and queue named and, when it means an outage,
// core.ErrBackendUnavailable in its chain. A nil err stays nil; an error that already wraps a
// core sentinel is only annotated.
func wrap(op, queue string, err error) error {
	if err == nil {
		return nil
	}
	where := "nats: " + op
	if queue != "" {
		where = fmt.Sprintf("nats: %s (queue %q)", op, queue)
	}
	switch {
	case errors.Is(err, core.ErrBackendUnavailable), errors.Is(err, core.ErrLeaseLost),
		errors.Is(err, core.ErrClosed), errors.Is(err, core.ErrInvalidConfig), errors.Is(err, core.ErrRejected):
		return fmt.Errorf("%s: %w", where, err)
	case isRejected(err):
		return fmt.Errorf("%s: the NATS server refused the message permanently (over max_payload or the stream's max_msg_size); it is not retried: %w: %w", where, core.ErrRejected, err)
	case isUnavailable(err):
		return fmt.Errorf("%s: the NATS server is unreachable or not serving JetStream right now; the call can be retried later: %w: %w", where, core.ErrBackendUnavailable, err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("%s: JetStream is not enabled for this account; enable it in the server's account config: %w", where, err)
	case errors.Is(err, natsgo.ErrAuthorization), errors.Is(err, natsgo.ErrPermissionViolation), errors.Is(err, natsgo.ErrAuthExpired):
		return fmt.Errorf("%s: the NATS user is not allowed to do this; check its credentials and permissions: %w", where, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// errClosed is returned by every call made after Close.
func errClosed(op, queue string) error {
	return wrap(op, queue, fmt.Errorf("the backend was closed; open a new one: %w", core.ErrClosed))
}
