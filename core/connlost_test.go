package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

func TestConnectionLost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("syntax error"), false},
		{context.Canceled, false},
		{io.EOF, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{net.ErrClosed, true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{syscall.ECONNRESET, true},
		{syscall.EPIPE, true},
		{&net.OpError{Op: "dial", Err: errors.New("x")}, true},
		{&net.DNSError{Err: "no such host", Name: "h"}, true},
	} {
		if got := ConnectionLost(tt.err); got != tt.want {
			t.Errorf("ConnectionLost(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
