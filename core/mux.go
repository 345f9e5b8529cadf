package core

import (
	"context"
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

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	return slices.Sorted(maps.Keys(openers))
}

// OpenBackend opens the backend named by rawURL (for example memory://, postgres://...,
// redis://...). The adapter's package must be imported (often as _ "github.com/txmq/txmq/adapters/redis").
// Errors never include the URL's password.
func OpenBackend(ctx context.Context, rawURL string) (Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: backend URL: %v", ErrInvalidConfig, redactErr(err, rawURL))
	}
	openersMu.RLock()
	open := openers[strings.ToLower(u.Scheme)]
	openersMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w: backend URL %s: unknown scheme %q; registered schemes: %s (import the adapter package to register its scheme)", ErrInvalidConfig, RedactURL(u), u.Scheme, strings.Join(Schemes(), ", "))
	}
	b, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("txmq: opening backend %s: %w", RedactURL(u), err)
	}
	return b, nil
}

// RedactURL returns u as text with its password and the values of password-, secret- and
// token-like query parameters replaced by "xxxxx", for logs and errors.
func RedactURL(u *url.URL) string {
	c := *u
	if q := c.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if SecretParam(k) {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			c.RawQuery = q.Encode()
		}
	}
	return c.Redacted()
}

// secretWords mark a URL parameter or connection-string keyword whose value is a secret
// (password, sslpassword, passwd, pwd, secret_key, token, credentials, ...).
var secretWords = []string{"pass", "pwd", "secret", "token", "credential", "key"}

// SecretWords returns the words that mark a parameter or keyword as holding a secret: a name
// containing one of them (case-insensitively) is redacted from logs and errors.
func SecretWords() []string { return append([]string(nil), secretWords...) }

// SecretParam reports whether a URL query parameter's (or connection-string keyword's) name
// says its value is a secret; see SecretWords.
func SecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactErr keeps a URL parse error from echoing a password.
func redactErr(err error, raw string) string {
	msg := err.Error()
	if u, perr := url.Parse(raw); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	if i := strings.Index(raw, "@"); i > 0 {
		msg = strings.ReplaceAll(msg, raw[:i], "<redacted>")
	}
	return msg
}
