package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Schemes are the TXMQ_DATABASE_URL schemes this package registers with
// outbox.RegisterDatabase: importing it (blank) lets txmq.Open and the command line use a
// SQLite app database (the same schemes the sqlite jobs adapter registers as backends).
var Schemes = []string{"sqlite", "sqlite3"}

func init() {
	outbox.RegisterDatabase(outbox.Database{Open: OpenStore, Migrate: migrateURL}, Schemes...)
}

// DefaultBusyTimeout is the PRAGMA busy_timeout OpenDB sets: how long a statement waits for
// another connection's write lock before it fails with SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// OpenDB opens a *sql.DB on the SQLite file at path with what the outbox relies on, on every
// connection: _txlock=immediate (BeginTx, and so RunInSQLTx, takes the file's write lock when
// the transaction begins, so it never fails half-way for a lock: SQLITE_BUSY_SNAPSHOT),
// PRAGMA busy_timeout (DefaultBusyTimeout), journal_mode=WAL (readers never wait for the
// writer) and synchronous=FULL (a committed transaction, its outbox rows with it, survives a
// power cut). params are modernc.org/sqlite DSN parameters (each starting with _, such as
// _pragma=synchronous(NORMAL)) that override these by name. It does not touch the file until
// the first statement. An app opens its file once this way and uses the handle for its own
// tables and for NewDialect.
func OpenDB(path string, params url.Values) (*sql.DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	for k := range params {
		if !strings.HasPrefix(k, "_") && k != "vfs" {
			return nil, fmt.Errorf("%w: sqlite appdb: parameter %q is not a modernc.org/sqlite DSN parameter (those start with _, such as _pragma=synchronous(NORMAL))", core.ErrInvalidConfig, k)
		}
	}
	return sql.Open("sqlite", dsn(path, params))
}

// dsn is the driver's data source name for path: the defaults (see OpenDB), each unless
// params set it, then params.
func dsn(path string, params url.Values) string {
	q := url.Values{}
	set := map[string]bool{}
	for _, p := range params["_pragma"] {
		name, _, _ := strings.Cut(p, "(")
		name, _, _ = strings.Cut(name, "=")
		set[strings.ToLower(strings.TrimSpace(name))] = true
	}
	for _, d := range []struct{ name, value string }{
		{"busy_timeout", fmt.Sprint(DefaultBusyTimeout.Milliseconds())},
		{"journal_mode", "WAL"},
		{"synchronous", "FULL"},
	} {
		if !set[d.name] {
			q.Add("_pragma", d.name+"("+d.value+")")
		}
	}
	if params.Get("_txlock") == "" {
		q.Set("_txlock", "immediate")
	}
	for k, vs := range params {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	return path + "?" + q.Encode()
}

// checkPath refuses a path that does not name a file SQLite shares between processes.
func checkPath(path string) error {
	lower := strings.ToLower(path)
	switch {
	case path == "":
		return fmt.Errorf("%w: sqlite appdb: the URL names no file; use sqlite://app.db (relative to the working directory) or sqlite:///var/lib/app/app.db (absolute)", core.ErrInvalidConfig)
	case strings.Contains(lower, ":memory:") || strings.HasPrefix(lower, "file:") || strings.Contains(lower, "mode=memory"):
		return fmt.Errorf("%w: sqlite appdb: %q is an in-memory or URI database name; the outbox must survive the process and be shared with the relays of other processes: use a file path such as sqlite://app.db", core.ErrInvalidConfig, path)
	case strings.ContainsAny(path, "?#"):
		return fmt.Errorf("%w: sqlite appdb: the file name %q holds ? or #, which the driver reads as parameters; rename the file", core.ErrInvalidConfig, path)
	}
	return nil
}

// ParseURL returns the file and the driver parameters of a SQLite app database URL:
// sqlite://app.db and sqlite://data/app.db are relative to the working directory,
// sqlite:///var/lib/app/app.db (three slashes) is absolute, sqlite:app.db is sqlite://app.db
// (sqlite3:// alike). Query parameters are modernc.org/sqlite's DSN parameters (starting with
// _, such as _pragma=synchronous(NORMAL) or _txlock=deferred); txmq_ parameters are refused
// (the app database's settings are txmq.Config's: SkipMigrate, TXMQ_MIGRATE), and so are a
// user or password. Errors wrap core.ErrInvalidConfig.
func ParseURL(u *url.URL) (path string, params url.Values, err error) {
	if u.Opaque != "" {
		path = u.Opaque
	} else {
		path = u.Host + u.Path
	}
	if u.User != nil {
		return "", nil, fmt.Errorf("%w: sqlite appdb: database URL %s has a user or password; a SQLite file has none: use sqlite://app.db", core.ErrInvalidConfig, core.RedactURL(u))
	}
	if err := checkPath(path); err != nil {
		return "", nil, err
	}
	q := u.Query()
	for k := range q {
		switch {
		case strings.HasPrefix(strings.ToLower(k), "txmq_"):
			return "", nil, fmt.Errorf("%w: sqlite appdb: database URL %s: parameter %s is not one of the app database's; set TXMQ_MIGRATE (Config.SkipMigrate) instead, and the relay's settings in Config.Outbox", core.ErrInvalidConfig, core.RedactURL(u), k)
		case !strings.HasPrefix(k, "_") && k != "vfs":
			return "", nil, fmt.Errorf("%w: sqlite appdb: database URL %s: parameter %q is not a modernc.org/sqlite DSN parameter (those start with _, such as _pragma=synchronous(NORMAL))", core.ErrInvalidConfig, core.RedactURL(u), k)
		}
	}
	return path, q, nil
}

// checkSchema accepts the schemas that mean the file's main database: SQLite has no schemas.
func checkSchema(schema string) error {
	switch schema {
	case "", "main", outbox.DefaultSchema:
		return nil
	}
	return fmt.Errorf("%w: sqlite appdb: schema %q (TXMQ_SCHEMA, Config.Schema): SQLite has no schemas, the tables live in the file's main database; leave it unset (or %q), and use a file per namespace", core.ErrInvalidConfig, schema, outbox.DefaultSchema)
}

// OpenStore opens an outbox.Store on the SQLite file of u (OpenDB), migrating first when
// migrate is set. opts.Schema must be "", "main" or outbox.DefaultSchema (SQLite has no
// schemas). It implements outbox.DatabaseOpener; closeDB closes the *sql.DB it opened.
func OpenStore(ctx context.Context, u *url.URL, opts *outbox.Options, migrate bool) (*outbox.Store, func() error, error) {
	path, params, err := ParseURL(u)
	if err != nil {
		return nil, nil, err
	}
	if opts != nil {
		if err := checkSchema(opts.Schema); err != nil {
			return nil, nil, err
		}
	}
	if !migrate {
		if err := checkExists(path); err != nil {
			return nil, nil, err
		}
	}
	db, err := OpenDB(path, params)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*outbox.Store, func() error, error) {
		_ = db.Close()
		return nil, nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("%w: sqlite appdb: database URL %s: cannot open the file: %w", core.ErrBackendUnavailable, core.RedactURL(u), err))
	}
	if migrate {
		if err := Migrate(ctx, db); err != nil {
			return fail(fmt.Errorf("database URL %s: %w", core.RedactURL(u), err))
		}
	}
	d, err := NewDialect(db)
	if err != nil {
		return fail(err)
	}
	s, err := outbox.NewWithDialect(d, opts)
	if err != nil {
		return fail(err)
	}
	return s, db.Close, nil
}

// checkExists refuses a file that does not exist when nothing is to create it (no
// migration): SQLite would create an empty file, and every statement then finds no table.
func checkExists(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: sqlite appdb: the file %s does not exist (relative paths are from the working directory); create its tables with txmq migrate --database-url sqlite://%s, or let txmq.Open migrate (TXMQ_MIGRATE unset)", core.ErrInvalidConfig, path, path)
	}
	return nil
}

// migrateURL migrates the tables of the file of u (txmq migrate).
func migrateURL(ctx context.Context, u *url.URL, schema string) error {
	path, params, err := ParseURL(u)
	if err != nil {
		return err
	}
	if err := checkSchema(schema); err != nil {
		return err
	}
	db, err := OpenDB(path, params)
	if err != nil {
		return err
	}
	defer db.Close()
	return Migrate(ctx, db)
}
