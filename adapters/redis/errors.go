package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// unavailablePrefixes are the Redis error replies that mean "this server cannot take the call
// now, but may soon": a replica loading its data set or promoted mid-call, a failover, a
// cluster slot moving or the cluster being down, a busy script, and redirections the client
// gave up following (go-redis returns the last MOVED/ASK after Options.MaxRedirects: a
// redirection storm during resharding or failover).
var unavailablePrefixes = []string{
	"LOADING",
	"READONLY",
	"MASTERDOWN",
	"TRYAGAIN",
	"CLUSTERDOWN",
	"BUSY",
	"NOREPLICAS",
	"MOVED",
	"ASK",
	"ERR max number of clients reached",
}

// rejectedReplies are parts of Redis error replies that refuse a command permanently, whatever
// the server's health: a bulk argument (a batch body) over proto-max-bulk-len, or a string
// value over the 512 MB limit. Retrying the same batch can never succeed.
var rejectedReplies = []string{
	"Protocol error: invalid bulk length",
	"string exceeds maximum allowed size",
	"Protocol error: too big",
}

// rejected reports whether err is a Redis reply that refuses the command permanently (see
// rejectedReplies). It is checked before unavailable: such a refusal is never an outage.
func rejected(err error) bool {
	var rerr goredis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	for _, r := range rejectedReplies {
		if strings.Contains(rerr.Error(), r) {
			return true
		}
	}
	return false
}

// unavailableErrnos are the system errors of a connection that failed or was cut.
var unavailableErrnos = []error{
	syscall.ECONNREFUSED,
	syscall.ECONNRESET,
	syscall.ECONNABORTED,
	syscall.EPIPE,
	syscall.ETIMEDOUT,
	syscall.EHOSTUNREACH,
	syscall.ENETUNREACH,
	syscall.ENETDOWN,
}

// unavailable reports whether err means Redis could not be reached or refused work for a
// reason that should pass: the connection was refused, reset or closed, an i/o or dial timed
// out, no pooled connection came in time, or the server answered with one of
// unavailablePrefixes. Everything else (a wrong type, bad arguments, authentication or ACL
// refusals, out of memory, a missing script) is not, because waiting does not fix it.
// context.Canceled is never unavailable; context.DeadlineExceeded is (the server did not answer
// within the caller's time).
func unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, core.ErrBackendUnavailable) {
		return true
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		raw := rerr.Error()
		trimmed := strings.TrimPrefix(raw, "ERR ") // some servers prefix every error with ERR
		for _, p := range unavailablePrefixes {
			for _, msg := range [...]string{raw, trimmed} {
				// A whole first word only: BUSYGROUP and BUSYKEY are not BUSY.
				if msg == p || strings.HasPrefix(msg, p+" ") {
					return true
				}
			}
		}
		return false
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrPoolExhausted):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return true
	}
	for _, e := range unavailableErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return true
	}
	var operr *net.OpError
	if errors.As(err, &operr) {
		return true // a dial, read or write on the socket failed
	}
	var dnserr *net.DNSError
	return errors.As(err, &dnserr)
}

// wrapErr is the one place this package turns a go-redis error into a txmq error: errors
// meaning Redis is unreachable wrap core.ErrBackendUnavailable, a client closed by Close wraps
// core.ErrClosed, permanent refusals (too large) wrap core.ErrRejected, and every other error is returned with context but unclassified. what says
// which call on which queue failed; the original error stays in the chain either way.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, goredis.ErrClosed):
		return fmt.Errorf("redis: %s: the backend was closed; open a new one: %w (%w)", what, core.ErrClosed, err)
	case rejected(err):
		return fmt.Errorf("redis: %s: Redis refused it permanently (too large for the server's proto-max-bulk-len?); it is not retried: %w: %w", what, core.ErrRejected, err)
	case unavailable(err):
		if errors.Is(err, core.ErrBackendUnavailable) {
			return fmt.Errorf("redis: %s: %w", what, err)
		}
		return fmt.Errorf("redis: %s: Redis unreachable or unable to serve (it will be retried; check the server and the network): %w: %w", what, core.ErrBackendUnavailable, err)
	default:
		return fmt.Errorf("redis: %s: %w", what, err)
	}
}
