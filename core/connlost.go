package core

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

// ConnectionLost reports whether err is a failure of the connection itself, which may pass,
// for an adapter's classification into ErrBackendUnavailable: the peer closed it (EOF, an
// unexpected EOF, a closed connection), a refused, reset, aborted or broken connection or one
// with no route, or any net.Error (dial, DNS, read, write, timeout).
func ConnectionLost(err error) bool {
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
