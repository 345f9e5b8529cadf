package txmq

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// otherDatabase returns what a module registered for the scheme of a TXMQ_DATABASE_URL that
// is not PostgreSQL's (outbox.RegisterDatabase), and whether there is one.
func otherDatabase(raw string) (outbox.Database, bool) {
	scheme, ok := databaseScheme(raw)
	if !ok {
		return outbox.Database{}, false
	}
	return outbox.LookupDatabase(scheme)
}

// databaseScheme returns the scheme of a TXMQ_DATABASE_URL: before "://", or before ":" in
// SQLite's short form (sqlite:app.db). A keyword/value string (host=... dbname=...) has none.
func databaseScheme(raw string) (string, bool) {
	scheme, _, ok := strings.Cut(raw, "://")
	if lower := strings.ToLower(raw); !ok && (strings.HasPrefix(lower, "sqlite:") || strings.HasPrefix(lower, "sqlite3:")) {
		scheme, _, ok = strings.Cut(raw, ":")
	}
	return scheme, ok
}

// openOtherStore opens the outbox Store on an app database other than PostgreSQL, through
// the opener its module registered, and starts it. What needs PostgreSQL (the ledger) is
// refused; pauses, ticks, the shared rate limit and heartbeats are the database's when its
// dialect keeps them (see Open).
func (a *App) openOtherStore(ctx context.Context, c *Config, db outbox.Database) error {
	u, err := url.Parse(c.DatabaseURL)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", core.ErrInvalidConfig, EnvDatabaseURL, core.Redact(c.DatabaseURL), core.RedactError(err, c.DatabaseURL))
	}
	if c.Ledger != nil {
		return fmt.Errorf("%w: Config.Ledger is set but the ledger needs the app database on PostgreSQL, and %s is %s://; leave Config.Ledger nil", core.ErrInvalidConfig, EnvDatabaseURL, strings.ToLower(u.Scheme))
	}
	o := c.Outbox
	o.Schema, o.Backend = c.Schema, a.Backend
	if o.Logger == nil {
		o.Logger = c.Logger
	}
	store, closeDB, err := db.Open(ctx, u, &o, !c.SkipMigrate)
	if err != nil {
		return &settingError{setting: EnvDatabaseURL, err: core.RedactError(err, c.DatabaseURL)}
	}
	a.Store, a.closeDB = store, closeDB
	if err := store.Start(ctx); err != nil {
		return core.RedactError(fmt.Errorf("%s %s: starting the outbox relay of %q: %w", EnvDatabaseURL, core.Redact(c.DatabaseURL), c.Schema, err), c.DatabaseURL)
	}
	return nil
}
