package parity

import (
	"testing"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// Proxy is a TCP proxy for a Harness's Env.Break and Env.Restore: it listens on 127.0.0.1 and
// a free port and forwards every connection to the backend's server. Point the Env's clients
// at Addr; Break cuts every live connection and refuses new ones (clients see a reset or EOF)
// until Restore, and the port stays the same, so clients reconnect without being reopened.
// Give each Env its own Proxy so that breaking one property's backend leaves the others alone.
// Safe for concurrent use.
type Proxy struct{ p *testenv.Proxy }

// NewProxy starts a proxy to target (host:port), closed in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return &Proxy{testenv.NewProxy(t, target)}
}

// Addr is the proxy's host:port; clients dial it instead of the server.
func (p *Proxy) Addr() string { return p.p.Addr() }

// Break closes every live connection and refuses new ones until Restore.
func (p *Proxy) Break() { p.p.Break() }

// Restore forwards connections again.
func (p *Proxy) Restore() { p.p.Restore() }
