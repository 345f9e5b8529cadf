package txmq

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// settingError is an error about one setting (TXMQ_BACKEND, ...). Its text has one "txmq: "
// prefix, before the setting's name, however many the wrapped error's text holds.
type settingError struct {
	setting string
	err     error
}

func (e *settingError) Error() string {
	return "txmq: " + e.setting + ": " + strings.ReplaceAll(e.err.Error(), "txmq: ", "")
}

func (e *settingError) Unwrap() error { return e.err }

// checkDatabaseScheme rejects a TXMQ_DATABASE_URL of another database before pgx parses it (pgx
// would report a keyword/value parse error). Keyword/value strings ("host=... dbname=...")
// have no scheme and pass.
func checkDatabaseScheme(raw string) error {
	scheme, ok := databaseScheme(raw)
	if !ok {
		return nil
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return nil
	}
	if _, ok := outbox.LookupDatabase(scheme); ok {
		return nil
	}
	return fmt.Errorf("%w: %s %s: unknown scheme %q; expected postgres://user:password@host:5432/db (PostgreSQL), mysql://user:password@host:3306/db (MySQL/MariaDB) or sqlite://app.db (SQLite)%s",
		core.ErrInvalidConfig, EnvDatabaseURL, core.Redact(raw), core.RedactText(scheme, raw), databaseSchemeHint(scheme))
}

// databaseSchemeHint is what an error about a TXMQ_DATABASE_URL of scheme adds for a database
// whose app database module is not linked (MySQL/MariaDB, SQLite): the import that adds it;
// "" for any other scheme.
func databaseSchemeHint(scheme string) string {
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb":
		return fmt.Sprintf("; import _ \"github.com/txmq/txmq/adapters/mysql/appdb\" to use %s:// as the app database (the outbox and dead letters in MySQL/MariaDB)",
			strings.ToLower(scheme))
	case "sqlite", "sqlite3":
		return fmt.Sprintf("; import _ \"github.com/txmq/txmq/adapters/sqlite/appdb\" to use %s:// as the app database (the outbox and dead letters in the SQLite file)",
			strings.ToLower(scheme))
	}
	return ""
}

// connectCause returns the reason a connection failed, once: pgx lists one line per address
// and TLS mode it tried, each with the same network error.
func connectCause(err error, raw string) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return core.RedactText(op.Error(), raw)
	}
	text := core.RedactText(err.Error(), raw)
	if lines := strings.Split(text, "\n"); len(lines) > 1 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return text
}
