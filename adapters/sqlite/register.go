package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlurl"
)

// Schemes are the URL schemes this package registers with core.RegisterBackend.
var Schemes = []string{"sqlite", "sqlite3"}

func init() { core.RegisterSchemes(Open, Schemes...) }

// urlParams are the query parameters Open consumes, with what each sets.
var urlParams = map[string]string{
	"txmq_migrate":         "run Migrate first (true or false, default true)",
	"txmq_lease":           "nothing: accepted and ignored (a Go duration; the node's NodeOptions.Lease decides)",
	"txmq_fetch_limit":     "nothing: accepted and ignored (a positive number; the node's NodeOptions.FetchMax decides)",
	"txmq_query_timeout":   "Options.QueryTimeout (a Go duration)",
	"txmq_busy_timeout":    "Options.BusyTimeout (a Go duration)",
	"txmq_abandoned_after": "Options.AbandonedAfter (a Go duration)",
	"txmq_reap_interval":   "Options.ReapInterval (a Go duration; negative turns the reaper off)",
	"txmq_poll_interval":   "Options.PollInterval (a Go duration)",
}

// Open opens a Backend from a URL, as core.OpenBackend does for TXMQ_BACKEND=sqlite://app.db.
//
// The URL names a file: sqlite://app.db and sqlite://data/app.db are relative to the working
// directory, sqlite:///var/lib/app/jobs.db (three slashes) is absolute. Query parameters
// starting with txmq_ set Options (txmq_migrate, txmq_lease, txmq_fetch_limit,
// txmq_query_timeout, txmq_busy_timeout, txmq_abandoned_after, txmq_reap_interval,
// txmq_poll_interval); those starting with _ are modernc.org/sqlite's DSN parameters
// (_pragma=synchronous(NORMAL), ...). An in-memory database (:memory:, mode=memory) is
// refused: it is neither durable nor shared between processes. Open creates its own
// *sql.DB (OpenDB), closed by Backend.Close, and runs Migrate unless txmq_migrate=false. A
// dead-letter sink for the reaper cannot be given in a URL: use New.
func Open(ctx context.Context, u *url.URL) (core.Backend, error) {
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Backend, error) {
	path, opts, migrate, driverParams, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	db, err := openDB(path, opts, driverParams)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlite: backend URL %s: %w", core.ErrInvalidConfig, core.RedactURL(u), err)
	}
	if migrate {
		if err := Migrate(ctx, db, opts); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("sqlite: backend URL %s: %w", core.RedactURL(u), err)
		}
	}
	be, err := New(ctx, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	be.ownDB = true
	return be, nil
}

// OpenDB opens a *sql.DB on the SQLite file at path with the settings the Backend relies on,
// on every connection: PRAGMA busy_timeout (opts.BusyTimeout, default 5 s), journal_mode=WAL
// and synchronous=FULL (a committed publish or settle survives a power cut). It does not
// touch the file until the first statement. Apps that use the same file for their own tables
// open it once this way and pass it to Migrate and New.
func OpenDB(path string, opts *Options) (*sql.DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	return openDB(path, &o, nil)
}

// openDB opens the handle with the default pragmas, driverParams overriding them by name.
func openDB(path string, opts *Options, driverParams url.Values) (*sql.DB, error) {
	return sql.Open("sqlite", dsn(path, opts, driverParams))
}

// dsn is the driver's data source name for path: the default pragmas (busy_timeout,
// journal_mode=WAL, synchronous=FULL), each unless driverParams set it, then driverParams.
func dsn(path string, opts *Options, driverParams url.Values) string {
	q := url.Values{}
	set := map[string]bool{}
	for _, p := range driverParams["_pragma"] {
		name, _, _ := strings.Cut(p, "(")
		name, _, _ = strings.Cut(name, "=")
		set[strings.ToLower(strings.TrimSpace(name))] = true
	}
	busy := opts.BusyTimeout
	if busy == 0 {
		busy = DefaultBusyTimeout
	}
	for _, d := range []struct{ name, value string }{
		{"busy_timeout", fmt.Sprint(busy.Milliseconds())},
		{"journal_mode", "WAL"},
		{"synchronous", "FULL"},
	} {
		if !set[d.name] {
			q.Add("_pragma", d.name+"("+d.value+")")
		}
	}
	for k, vs := range driverParams {
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
		return fmt.Errorf("%w: sqlite: the URL names no file; use sqlite://app.db (relative to the working directory) or sqlite:///var/lib/app/jobs.db (absolute)", core.ErrInvalidConfig)
	case strings.Contains(lower, ":memory:") || strings.HasPrefix(lower, "file:"):
		return fmt.Errorf("%w: sqlite: %q is an in-memory or URI database name; an in-memory SQLite database is neither durable nor shared between processes: use memory:// for a throwaway queue, or a file path such as sqlite://app.db", core.ErrInvalidConfig, path)
	case strings.ContainsAny(path, "?#"):
		return fmt.Errorf("%w: sqlite: the file name %q holds ? or #, which the driver reads as parameters; rename the file", core.ErrInvalidConfig, path)
	}
	return nil
}

// parseURL returns what a sqlite:// URL sets: the file's path, the Options, whether to
// migrate and the driver's parameters, without I/O.
func parseURL(u *url.URL) (path string, opts *Options, migrate bool, driverParams url.Values, err error) {
	switch {
	case u.Opaque != "": // sqlite:app.db
		path = u.Opaque
	default: // sqlite://app.db, sqlite://dir/app.db, sqlite:///abs/app.db
		path = u.Host + u.Path
	}
	if u.User != nil {
		return "", nil, false, nil, fmt.Errorf("%w: sqlite: backend URL %s has a user or password; a SQLite file has none: use sqlite://app.db", core.ErrInvalidConfig, core.RedactURL(u))
	}
	if err := checkPath(path); err != nil {
		return "", nil, false, nil, err
	}
	q := u.Query()
	var busy time.Duration
	for key, vals := range q {
		if strings.EqualFold(key, "txmq_busy_timeout") {
			v := vals[len(vals)-1]
			if busy, err = time.ParseDuration(v); err != nil || busy <= 0 {
				return "", nil, false, nil, fmt.Errorf("%w: sqlite: backend URL parameter %s=%q: use a positive Go duration such as 5s", core.ErrInvalidConfig, key, v)
			}
			q.Del(key)
		}
	}
	set, err := sqlurl.Take("sqlite", q, urlParams)
	if err != nil {
		return "", nil, false, nil, err
	}
	if set.Schema != "" {
		return "", nil, false, nil, fmt.Errorf("%w: sqlite: backend URL parameter txmq_schema: SQLite has no schemas; use a file per namespace", core.ErrInvalidConfig)
	}
	for key := range q {
		if !strings.HasPrefix(key, "_") && key != "vfs" {
			return "", nil, false, nil, fmt.Errorf("%w: sqlite: backend URL parameter %q is neither a txmq_ parameter (%s) nor a modernc.org/sqlite DSN parameter (starting with _, such as _pragma=synchronous(NORMAL))", core.ErrInvalidConfig, key, core.ParamNames(urlParams))
		}
	}
	opts = &Options{
		QueryTimeout:   set.QueryTimeout,
		BusyTimeout:    busy,
		AbandonedAfter: set.AbandonedAfter,
		ReapInterval:   set.ReapInterval,
		PollInterval:   set.PollInterval,
	}
	if _, err := opts.withDefaults(); err != nil {
		return "", nil, false, nil, err
	}
	return path, opts, set.Migrate, q, nil
}
