package outbox

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// DatabaseOpener opens a Store on an app database of another kind than PostgreSQL, from its
// URL (TXMQ_DATABASE_URL): the module of that database registers one in an init func
// (RegisterDatabase), as backends register their schemes. opts is the Store's options
// (Backend set, Schema the one schema or database of txmq's tables); migrate says whether to
// migrate the tables first. closeDB closes what the opener opened (its *sql.DB), after the
// store's Close.
type DatabaseOpener func(ctx context.Context, u *url.URL, opts *Options, migrate bool) (store *Store, closeDB func() error, err error)

// DatabaseMigrator migrates the tables of an app database of another kind than PostgreSQL,
// for the command line's migrate (see RegisterDatabase).
type DatabaseMigrator func(ctx context.Context, u *url.URL, schema string) error

// Database is what a module registers for an app database scheme.
type Database struct {
	// Open opens a Store on the database. Required.
	Open DatabaseOpener
	// Migrate migrates its tables. Required.
	Migrate DatabaseMigrator
}

var (
	dbMu      sync.RWMutex
	databases = map[string]Database{}
)

// RegisterDatabase registers d for app database URLs of the given schemes (lower case, e.g.
// "mysql", "mariadb"). A later registration of a scheme replaces the earlier one.
func RegisterDatabase(d Database, schemes ...string) {
	dbMu.Lock()
	defer dbMu.Unlock()
	for _, s := range schemes {
		databases[strings.ToLower(s)] = d
	}
}

// LookupDatabase returns what was registered for scheme, if anything.
func LookupDatabase(scheme string) (Database, bool) {
	dbMu.RLock()
	defer dbMu.RUnlock()
	d, ok := databases[strings.ToLower(scheme)]
	return d, ok
}

// DatabaseSchemes lists the registered app database schemes (PostgreSQL's not included), sorted.
func DatabaseSchemes() []string {
	dbMu.RLock()
	defer dbMu.RUnlock()
	out := make([]string, 0, len(databases))
	for s := range databases {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
