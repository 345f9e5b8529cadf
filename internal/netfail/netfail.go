// Package netfail recognises the errors of a connection that failed, for the adapters'
// "backend unavailable" classification.
package netfail

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// lostErrnos are the system errors of a connection refused, reset, aborted, broken or with
// no route.
var lostErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH,
}

// Lost reports whether err is a failure of the connection itself, which may pass: the peer
// closed it (EOF, an unexpected EOF, a closed connection), a system error in lostErrnos, or any
// net.Error (dial, DNS, read, write, timeout).
func Lost(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	for _, e := range lostErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
