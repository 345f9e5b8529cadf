package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// allowMemoryBackend lets commands open memory:// backends. The command itself runs in its own
// process, where a memory backend is always empty, so it refuses them; tests that run commands
// in-process, next to the memory backends they fill, set it.
var allowMemoryBackend = false

// libraryPrefixes are the prefixes the library's errors start with. The command prints its own
// prefix ("txmq status: "), so message removes these: one prefix per line.
var libraryPrefixes = []string{"txmq outbox: ", "txmq: "}

// message returns err's text for an operator: without the library's own prefixes.
func message(err error) string {
	s := err.Error()
	for _, p := range libraryPrefixes {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

// setting names a flag and the environment variable it defaults to, for messages.
type setting struct{ flag, env string }

func (s setting) String() string { return fmt.Sprintf("--%s (or %s)", s.flag, s.env) }

var (
	databaseSetting = setting{"database-url", "TXMQ_DATABASE_URL"}
	backendSetting  = setting{"backend", "TXMQ_BACKEND"}
	drainSetting    = setting{"drain", "TXMQ_DRAIN_BACKENDS"}
)

// checkDatabaseURL rejects an app database URL of another scheme than postgres:// before pgx
// reads it (pgx would report a keyword/value parse error). Keyword/value strings
// ("host=... dbname=...") have no scheme and pass.
func checkDatabaseURL(raw string) error {
	i := strings.Index(raw, "://")
	if lower := strings.ToLower(raw); i < 0 && (strings.HasPrefix(lower, "sqlite:") || strings.HasPrefix(lower, "sqlite3:")) {
		i = strings.Index(raw, ":") // sqlite:app.db
	}
	if i < 0 {
		return nil
	}
	scheme := strings.ToLower(raw[:i])
	switch scheme {
	case "postgres", "postgresql":
		return nil
	}
	if _, ok := outbox.LookupDatabase(scheme); ok {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("%s %s: unknown scheme %q; expected postgres://user:password@host:5432/dbname (PostgreSQL), mysql://user:password@host:3306/dbname (MySQL/MariaDB) or sqlite://app.db (SQLite)",
		databaseSetting, core.Redact(raw), core.RedactText(raw[:i], raw))}
}

// checkBackendURL rejects a backend URL whose scheme no adapter registered, and, unless the
// command runs the backend itself (bench), a memory:// backend, which only the process that
// created it can see.
func checkBackendURL(s setting, raw string, ownProcess bool) error {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return &usageError{msg: fmt.Sprintf("%s %s has no scheme; write scheme://..., one of: %s", s, core.Redact(raw), schemeList())}
	}
	scheme = strings.ToLower(scheme)
	known := false
	for _, k := range core.Schemes() {
		known = known || k == scheme
	}
	if !known {
		return &usageError{msg: fmt.Sprintf("%s %s: unknown scheme %q; expected one of: %s", s, core.Redact(raw), core.RedactText(scheme, raw), schemeList())}
	}
	if scheme == "memory" && !ownProcess && !allowMemoryBackend {
		return &usageError{msg: fmt.Sprintf("%s %s: a memory backend lives inside the process that created it, so this command cannot see an app's memory backend from another process; set %s to the backend the app shares (redis://, postgres://, sqs:// or nats://)",
			s, core.Redact(raw), s)}
	}
	return nil
}

// schemeList lists the registered schemes as scheme:// for messages.
func schemeList() string {
	out := make([]string, 0, len(core.Schemes()))
	for _, s := range core.Schemes() {
		out = append(out, s+"://")
	}
	return strings.Join(out, ", ")
}

// openBackend checks raw and opens it; a backend URL the adapter rejects is a usage error
// naming the setting.
func openBackend(ctx context.Context, s setting, raw string, ownProcess bool) (core.Backend, error) {
	if err := checkBackendURL(s, raw, ownProcess); err != nil {
		return nil, err
	}
	be, err := core.OpenBackend(ctx, raw)
	if errors.Is(err, core.ErrInvalidConfig) {
		return nil, &usageError{msg: fmt.Sprintf("%s is not valid: %s", s, withoutOpening(message(err), raw))}
	}
	if err != nil {
		return nil, unreachable(s, raw, "the backend", err)
	}
	return be, nil
}

// unreachable describes a failure to talk to a server: the network cause once (pgx lists one
// per address it tried), and the setting to check.
func unreachable(s setting, raw, what string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("cannot connect to %s %s: %s; check the host and port in %s and that the server runs there",
			what, core.Redact(raw), core.RedactText(op.Error(), raw), s)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("cannot connect to %s %s: %s; check the host in %s", what, core.Redact(raw), core.RedactText(dns.Error(), raw), s)
	}
	text := withoutOpening(message(core.RedactError(err, raw)), raw)
	if lines := strings.Split(text, "\n"); len(lines) > 1 {
		text = strings.TrimSpace(lines[len(lines)-1])
	}
	return fmt.Errorf("%s %s: %s; check %s", what, core.Redact(raw), text, s)
}

// withoutOpening removes the "opening backend URL: " that core.OpenBackend puts before an
// adapter's error: the command's message names the URL already.
func withoutOpening(text, raw string) string {
	return strings.TrimPrefix(text, "opening backend "+core.Redact(raw)+": ")
}
