package wrapped_test

import (
	"context"
	"os"
	"testing"

	"example.com/wrapped"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity"
)

// harness gives each parity property a new Backend, opened through the registered scheme.
type harness struct{}

func (harness) Name() string { return "wrapped" }

func (harness) Capabilities() parity.Caps { return parity.Caps{} }

func (harness) Open(t *testing.T) parity.Env {
	be, err := core.OpenBackend(context.Background(), wrapped.Scheme+"://")
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return env{be.(*wrapped.Backend)}
}

// env is one Backend; every client is the same value, as nodes of one process share it. A
// backend behind a network would hand out a new client per call, dialling a parity.Proxy
// that Break and Restore cut and mend.
type env struct{ be *wrapped.Backend }

func (e env) Backend(*testing.T) core.Backend { return e.be }
func (e env) Break(*testing.T)                { e.be.Break() }
func (e env) Restore(*testing.T)              { e.be.Restore() }

func TestParity(t *testing.T) {
	// Empty PostgresURL: TXMQ_POSTGRES_URL, else the local default.
	parity.RunWith(t, harness{}, &parity.Options{PostgresURL: os.Getenv("WRAPPED_POSTGRES_URL")})
}
