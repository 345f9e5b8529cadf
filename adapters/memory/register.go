package memory

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
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
// Query parameters: txmq_seed sets Options.Seed. txmq_lease and txmq_fetch_limit, which set
// options the node always overrode (its NodeOptions.Lease and FetchMax decide), are still
// accepted, checked and ignored, so existing URLs keep working. The names of earlier versions,
// lease, fetch_limit and seed, are deprecated aliases, still accepted; given together with the
// current name, the two must agree. Parameters apply when the Backend is created and are
// ignored when the name is already open; an unknown parameter is an error wrapping
// core.ErrInvalidConfig that lists the accepted ones.
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

// urlParams are the query parameters Open accepts, each checking its value and setting the
// Options field it names, if any.
var urlParams = map[string]func(o *Options, v string) error{
	"txmq_lease": func(_ *Options, v string) error { // accepted and ignored: see Open
		d, err := time.ParseDuration(v)
		if err == nil && d <= 0 {
			err = fmt.Errorf("must be positive")
		}
		return err
	},
	"txmq_fetch_limit": func(_ *Options, v string) error { // accepted and ignored: see Open
		n, err := strconv.Atoi(v)
		if err == nil && n <= 0 {
			err = fmt.Errorf("must be positive")
		}
		return err
	},
	"txmq_seed": func(o *Options, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		o.Seed = n
		return err
	},
}

// deprecatedParams maps the parameter names of earlier versions, still accepted, to the
// current ones.
var deprecatedParams = map[string]string{
	"lease":       "txmq_lease",
	"fetch_limit": "txmq_fetch_limit",
	"seed":        "txmq_seed",
}

func optionsFromQuery(u *url.URL) (*Options, error) {
	opts := &Options{}
	q := u.Query()
	keys := slices.Sorted(maps.Keys(q))
	for _, key := range keys {
		name := key
		if current, ok := deprecatedParams[key]; ok {
			name = current
			if q.Has(current) {
				old, cur := q[key][len(q[key])-1], q[current][len(q[current])-1]
				if old != cur {
					return nil, fmt.Errorf("%w: memory backend URL: parameters %s=%q and %s=%q disagree; %s is the deprecated name of %s: give only %s", core.ErrInvalidConfig, key, old, current, cur, key, current, current)
				}
				continue // the current name sets it
			}
		}
		set, ok := urlParams[name]
		if !ok {
			return nil, fmt.Errorf("%w: memory backend URL: unknown parameter %q; accepted: %s (deprecated: lease, fetch_limit, seed)", core.ErrInvalidConfig, key, acceptedParams())
		}
		v := q[key][len(q[key])-1]
		if err := set(opts, v); err != nil {
			return nil, fmt.Errorf("%w: memory backend URL: parameter %s=%q: %v", core.ErrInvalidConfig, key, v, err)
		}
	}
	return opts, nil
}

// acceptedParams lists the accepted parameters, sorted.
func acceptedParams() string {
	names := make([]string, 0, len(urlParams))
	for k := range urlParams {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
