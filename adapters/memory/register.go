package memory

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// Scheme is the URL scheme this package registers with core.RegisterBackend.
const Scheme = "memory"

func init() { core.RegisterBackend(Scheme, Open) }

var (
	namedMu sync.Mutex
	named   = map[string]*Backend{}
)

// Open opens a Backend from a URL, as core.OpenBackend does for TXMQ_BACKEND=memory://...
//
//   - memory:// (no name) returns a new, private Backend on every call.
//   - memory://NAME returns the process-wide Backend of that name, created on first use, so
//     several nodes in one process can share work by naming the same backend. Once it is
//     closed, the next Open of the name starts a fresh, empty one.
//
// Query parameters set Options: lease (DefaultLease, a Go duration such as 30s), fetch_limit
// (FetchLimit) and seed (Seed). They apply when the Backend is created and are ignored when the
// name is already open; an unknown parameter is an error wrapping core.ErrInvalidConfig.
func Open(_ context.Context, u *url.URL) (core.Backend, error) {
	opts, err := optionsFromQuery(u)
	if err != nil {
		return nil, err
	}
	name := u.Host
	if name == "" {
		name = u.Opaque
	}
	if name == "" {
		return New(opts), nil
	}
	namedMu.Lock()
	defer namedMu.Unlock()
	if be, ok := named[name]; ok && !be.isClosed() {
		return be, nil
	}
	be := New(opts)
	be.name = name
	named[name] = be
	return be, nil
}

// forget removes a closed named Backend from the registry.
func (be *Backend) forget() {
	if be.name == "" {
		return
	}
	namedMu.Lock()
	defer namedMu.Unlock()
	if named[be.name] == be {
		delete(named, be.name)
	}
}

func (be *Backend) isClosed() bool {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.closed
}

func optionsFromQuery(u *url.URL) (*Options, error) {
	opts := &Options{}
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		var err error
		switch key {
		case "lease":
			opts.DefaultLease, err = time.ParseDuration(v)
			if err == nil && opts.DefaultLease <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "fetch_limit":
			opts.FetchLimit, err = strconv.Atoi(v)
			if err == nil && opts.FetchLimit <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "seed":
			opts.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return nil, fmt.Errorf("%w: memory backend URL: unknown parameter %q; known: lease, fetch_limit, seed", core.ErrInvalidConfig, key)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: memory backend URL: parameter %s=%q: %v", core.ErrInvalidConfig, key, v, err)
		}
	}
	return opts, nil
}
