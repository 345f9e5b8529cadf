package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// replyErr is a Redis error reply as go-redis returns it (anything with RedisError()).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readReset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", dialRefused, true},
		{"connection reset", readReset, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"EOF (closed by peer)", io.EOF, true},
		{"unexpected EOF", fmt.Errorf("reading reply: %w", io.ErrUnexpectedEOF), true},
		{"use of closed connection", net.ErrClosed, true},
		{"i/o timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true},
		{"deadline exceeded", os.ErrDeadlineExceeded, true},
		{"context deadline", context.DeadlineExceeded, true},
		{"pool timeout", goredis.ErrPoolTimeout, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "redis.invalid"}, true},
		{"LOADING", replyErr("LOADING Redis is loading the dataset in memory"), true},
		{"READONLY", replyErr("READONLY You can't write against a read only replica."), true},
		{"MASTERDOWN", replyErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"TRYAGAIN", replyErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"CLUSTERDOWN", replyErr("CLUSTERDOWN The cluster is down"), true},
		{"MOVED storm", replyErr("MOVED 3999 127.0.0.1:6381"), true},
		{"ASK storm", replyErr("ASK 3999 127.0.0.1:6381"), true},
		{"BUSY script", replyErr("BUSY Redis is busy running a script."), true},
		{"max clients", replyErr("ERR max number of clients reached"), true},
		{"wrapped LOADING", fmt.Errorf("pipeline: %w", replyErr("LOADING Redis is loading")), true},
		{"already unavailable", fmt.Errorf("x: %w", core.ErrBackendUnavailable), true},

		{"nil", nil, false},
		{"cancelled", context.Canceled, false},
		{"WRONGTYPE", replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"BUSYGROUP is not BUSY", replyErr("BUSYGROUP Consumer Group name already exists"), false},
		{"NOAUTH", replyErr("NOAUTH Authentication required."), false},
		{"WRONGPASS", replyErr("WRONGPASS invalid username-password pair or user is disabled."), false},
		{"NOPERM", replyErr("NOPERM this user has no permissions to run the 'evalsha' command"), false},
		{"OOM", replyErr("OOM command not allowed when used memory > 'maxmemory'."), false},
		{"NOSCRIPT", goredis.ErrNoScript, false},
		{"script error", replyErr("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"plain error", errors.New("something else"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unavailable(tt.err); got != tt.want {
				t.Fatalf("unavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if tt.err == nil {
				return
			}
			wrapped := wrapErr("publish to queue \"q\"", tt.err)
			if got := errors.Is(wrapped, core.ErrBackendUnavailable); got != tt.want {
				t.Fatalf("wrapErr(%v) wraps ErrBackendUnavailable = %v, want %v (%v)", tt.err, got, tt.want, wrapped)
			}
			if !errors.Is(wrapped, tt.err) {
				t.Fatalf("wrapErr(%v) lost the original error: %v", tt.err, wrapped)
			}
		})
	}
	if err := wrapErr("ack", goredis.ErrClosed); !errors.Is(err, core.ErrClosed) || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("a closed client: %v, want ErrClosed and not ErrBackendUnavailable", err)
	}
}

// TestErrorClassificationRealServer checks the classifier on errors the real server and a
// dead address produce, not only on hand-made ones.
func TestErrorClassificationRealServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newTestBackend(t, "", nil)
	key := "{" + be.Prefix() + ":wrongtype}:due"
	must(t, be.rdb.Set(ctx, key, "x", 0).Err())
	err := be.Publish(ctx, core.OutgoingBatch{ID: "b1", Queue: "wrongtype", Body: []byte("x")})
	if err == nil || errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish onto a key of the wrong type: %v, want an error that is not ErrBackendUnavailable", err)
	}
	// A port nobody listens on: connection refused.
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	must(t, lerr)
	addr := ln.Addr().String()
	ln.Close()
	dead, nerr := New(&Options{Addr: addr, MaxRetries: -1})
	must(t, nerr)
	defer dead.Close()
	err = dead.Publish(ctx, core.OutgoingBatch{ID: "b1", Queue: "q", Body: []byte("x")})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish to a closed port: %v, want ErrBackendUnavailable", err)
	}
}
