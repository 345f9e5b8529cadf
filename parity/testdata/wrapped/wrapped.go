// Package wrapped is the smallest txmq adapter written outside the txmq module: the memory
// backend under a URL scheme of its own. TestOutOfModuleAdapter (package parity) builds it in
// a throwaway module and runs the whole parity suite on it.
package wrapped

import (
	"context"
	"fmt"
	"net/url"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// Scheme is the URL scheme this package registers: wrapped:// opens a new Backend.
const Scheme = "wrapped"

func init() { core.RegisterBackend(Scheme, Open) }

// Backend implements core.Backend by embedding the memory backend; a real adapter implements
// Publish, Fetch, Ack, Retry, Drop, Extend, Depths and Close on its own store.
type Backend struct {
	*memory.Backend
}

// New returns a new, empty Backend.
func New() *Backend { return &Backend{memory.New(nil)} }

// Open opens a Backend from a wrapped:// URL; it takes no parameters.
func Open(_ context.Context, u *url.URL) (core.Backend, error) {
	if len(u.Query()) > 0 {
		return nil, fmt.Errorf("%w: wrapped:// takes no query parameters", core.ErrInvalidConfig)
	}
	return New(), nil
}
