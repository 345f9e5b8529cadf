package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Opener opens a backend from a URL. Adapters register one per scheme with RegisterBackend,
// usually in an init func, the way database/sql drivers register.
type Opener func(ctx context.Context, u *url.URL) (Backend, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// RegisterBackend makes a backend available under a URL scheme. It panics if the scheme is
// registered twice or the opener is nil, as database/sql.Register does.
func RegisterBackend(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	scheme = strings.ToLower(scheme)
	if open == nil {
		panic("txmq: RegisterBackend " + scheme + " with a nil opener")
	}
	if _, dup := openers[scheme]; dup {
		panic("txmq: RegisterBackend called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// RegisterSchemes is RegisterBackend for each of schemes, with one opener: for an adapter
// reachable under several names (redis:// and rediss://), from its package's init func.
func RegisterSchemes(open Opener, schemes ...string) {
	for _, s := range schemes {
		RegisterBackend(s, open)
	}
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	return slices.Sorted(maps.Keys(openers))
}

// OpenBackend opens the backend named by rawURL (for example memory://, postgres://...,
// redis://...). The adapter's package must be imported (often as _ "github.com/txmq/txmq/adapters/redis").
// Errors never include the URL's secrets: they show Redact(rawURL), and the opener's error
// goes through RedactError.
func OpenBackend(ctx context.Context, rawURL string) (Backend, error) {
	shown := Redact(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the raw URL url.Error quotes
		}
		return nil, fmt.Errorf("%w: backend URL %s does not parse: %v; write scheme://[user:password@]host..., percent-encoding reserved characters in the password", ErrInvalidConfig, shown, RedactError(err, rawURL))
	}
	openersMu.RLock()
	open := openers[strings.ToLower(u.Scheme)]
	openersMu.RUnlock()
	if open == nil && !strings.Contains(rawURL, "://") {
		return nil, fmt.Errorf("%w: backend URL %s has no scheme; write scheme://..., one of: %s (import the adapter package to register its scheme)", ErrInvalidConfig, shown, strings.Join(Schemes(), ", "))
	}
	if open == nil {
		scheme := strings.ToLower(u.Scheme)
		if pkg, ok := adapterOf[scheme]; ok {
			return nil, fmt.Errorf("%w: backend URL %s: scheme %q is not registered in this program (registered: %s); its adapter registers it when imported: add import _ %q to your main package, or _ \"github.com/txmq/txmq/adapters/all\" for every backend", ErrInvalidConfig, shown, scheme, strings.Join(Schemes(), ", "), pkg)
		}
		return nil, fmt.Errorf("%w: backend URL %s: unknown scheme %q; registered schemes: %s (import the adapter package to register its scheme)", ErrInvalidConfig, shown, RedactText(u.Scheme, rawURL), strings.Join(Schemes(), ", "))
	}
	b, err := open(ctx, u)
	if err != nil {
		return nil, &openError{shown: shown, err: RedactError(err, rawURL)}
	}
	return b, nil
}

// adapterOf names the package of this module's adapter for each of their schemes, for the
// error of an app that opens one without importing it.
var adapterOf = map[string]string{
	"memory":         "github.com/txmq/txmq/adapters/memory",
	"postgres":       "github.com/txmq/txmq/adapters/sqljobs",
	"postgresql":     "github.com/txmq/txmq/adapters/sqljobs",
	"redis":          "github.com/txmq/txmq/adapters/redis",
	"rediss":         "github.com/txmq/txmq/adapters/redis",
	"redis+cluster":  "github.com/txmq/txmq/adapters/redis",
	"rediss+cluster": "github.com/txmq/txmq/adapters/redis",
	"sqs":            "github.com/txmq/txmq/adapters/sqs",
	"awssqs":         "github.com/txmq/txmq/adapters/sqs",
	"nats":           "github.com/txmq/txmq/adapters/nats",
}

// openError is an opener's error with the URL it was opening. Its text has one "txmq: " prefix:
// the opener's error usually holds one already, from the sentinel it wraps.
type openError struct {
	shown string // the redacted URL
	err   error
}

func (e *openError) Error() string {
	return "txmq: opening backend " + e.shown + ": " + strings.ReplaceAll(e.err.Error(), "txmq: ", "")
}

func (e *openError) Unwrap() error { return e.err }
