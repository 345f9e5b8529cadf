package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// dbFlags are the flags of every command that reads the app database, and what the command
// opened with them (closed by the func openStore returns).
type dbFlags struct {
	url     *string
	schema  *string
	backend *string
	// resolved says that schema (and the backend URL) went through resolveSchema.
	resolved bool
	// publishes says that the command publishes (dlq replay, the dashboard's replay): openStore
	// then gives the store the backend. Other commands open the backend only to find queues.
	publishes bool

	pool    *pgxpool.Pool // set by openStore (PostgreSQL)
	closeDB func() error  // set by openStore (another database: closes its handle)
	store   *outbox.Store // set by openStore
	be      core.Backend  // the backend opened, nil until a command needs it
	beErr   error         // why the backend could not be opened, once tried
	triedBe bool
}

// backendHelp is the --backend flag's help of the commands that read the app database.
const backendHelp = "backend URL (from $TXMQ_BACKEND when set): where replays publish, and asked for the queues it holds"

func addDBFlags(fs *flag.FlagSet, withBackend bool) *dbFlags {
	f := &dbFlags{
		url:    fs.String("database-url", os.Getenv("TXMQ_DATABASE_URL"), "app database URL, postgres://... (from $TXMQ_DATABASE_URL when set)"),
		schema: fs.String("schema", os.Getenv("TXMQ_SCHEMA"), "schema of every txmq table: outbox, dead letters and a postgres:// backend's jobs (default $TXMQ_SCHEMA, else the backend URL's txmq_schema, else "+outbox.DefaultSchema+")"),
	}
	if withBackend {
		f.backend = fs.String("backend", os.Getenv("TXMQ_BACKEND"), backendHelp)
	}
	return f
}

// resolveSchema sets --schema to the one schema of txmq's tables, as txmq.Open does for the
// same settings: --schema (or TXMQ_SCHEMA) and a postgres:// backend URL's txmq_schema must
// agree, either one alone applies to every table, neither means txmq. backendURL (nil: the
// command's --backend, else TXMQ_BACKEND) is updated to carry the schema when it is a
// postgres:// URL. A conflict is a usage error naming both settings.
func (f *dbFlags) resolveSchema(backendURL *string) error {
	if backendURL == nil {
		backendURL = f.backend
	}
	if backendURL == nil {
		env := os.Getenv("TXMQ_BACKEND")
		backendURL = &env
	}
	schema, backend, err := outbox.ResolveSchema(*f.schema, *backendURL, outbox.SchemaSettingNames{Schema: "--schema (TXMQ_SCHEMA)", Backend: "backend URL (--backend or TXMQ_BACKEND)"})
	if err != nil {
		return &usageError{msg: core.RedactText(strings.TrimPrefix(err.Error(), core.ErrInvalidConfig.Error()+": "), *backendURL)}
	}
	*f.schema, *backendURL, f.resolved = schema, backend, true
	return nil
}

// openStore connects to the app database and returns an outbox store; when the command
// publishes (f.publishes) and a backend is set, it opens that backend for the store, else
// publishing fails with a clear error. The func returned closes everything the command
// opened with f.
func (f *dbFlags) openStore(ctx context.Context) (*outbox.Store, func(), error) {
	if *f.url == "" {
		return nil, nil, &usageError{msg: "no app database: set --database-url or TXMQ_DATABASE_URL"}
	}
	if !f.resolved {
		if err := f.resolveSchema(nil); err != nil {
			return nil, nil, err
		}
	}
	if db, u, ok := otherDatabase(*f.url); ok {
		return f.openOtherStore(ctx, db, u)
	}
	pool, err := connect(ctx, *f.url)
	if err != nil {
		return nil, nil, err
	}
	var backend core.Backend = noBackend{}
	if f.publishes && f.backend != nil && *f.backend != "" {
		if backend, err = openBackend(ctx, backendSetting, *f.backend, false); err != nil {
			pool.Close()
			return nil, nil, err
		}
		f.be, f.triedBe = backend, true
	}
	store, err := outbox.New(pool, &outbox.Options{Schema: *f.schema, Backend: backend})
	if err != nil {
		_ = backend.Close()
		pool.Close()
		return nil, nil, err
	}
	f.pool, f.store = pool, store
	return store, f.close, nil
}

// close closes what the command opened with f.
func (f *dbFlags) close() {
	if f.be != nil {
		_ = f.be.Close()
	}
	if f.pool != nil {
		f.pool.Close()
	}
	if f.closeDB != nil {
		_ = f.closeDB()
	}
}

// otherDatabase returns what a module registered for the scheme of an app database URL that
// is not PostgreSQL's (mysql:// or sqlite://, with adapters/mysql/appdb or adapters/sqlite/appdb
// linked), and the parsed URL.
func otherDatabase(raw string) (outbox.Database, *url.URL, bool) {
	scheme, _, ok := strings.Cut(raw, "://")
	if lower := strings.ToLower(raw); !ok && (strings.HasPrefix(lower, "sqlite:") || strings.HasPrefix(lower, "sqlite3:")) {
		scheme, _, ok = strings.Cut(raw, ":") // sqlite:app.db
	}
	if !ok {
		return outbox.Database{}, nil, false
	}
	db, ok := outbox.LookupDatabase(scheme)
	if !ok {
		return outbox.Database{}, nil, false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return outbox.Database{}, nil, false
	}
	return db, u, true
}

// openOtherStore is openStore on an app database other than PostgreSQL: its module opens the
// store (without migrating: txmq migrate does).
func (f *dbFlags) openOtherStore(ctx context.Context, db outbox.Database, u *url.URL) (*outbox.Store, func(), error) {
	var backend core.Backend = noBackend{}
	if f.publishes && f.backend != nil && *f.backend != "" {
		var err error
		if backend, err = openBackend(ctx, backendSetting, *f.backend, false); err != nil {
			return nil, nil, err
		}
		f.be, f.triedBe = backend, true
	}
	store, closeDB, err := db.Open(ctx, u, &outbox.Options{Schema: *f.schema, Backend: backend}, false)
	if err != nil {
		_ = backend.Close()
		if errors.Is(err, core.ErrBackendUnavailable) {
			return nil, nil, unreachable(databaseSetting, *f.url, "the app database", err)
		}
		return nil, nil, &usageError{msg: fmt.Sprintf("%s %s: %s", databaseSetting, core.Redact(*f.url), message(core.RedactError(err, *f.url)))}
	}
	f.store, f.closeDB = store, closeDB
	return store, f.close, nil
}

// backendURL returns the backend URL set for the command: --backend, else TXMQ_BACKEND.
func (f *dbFlags) backendURL() string {
	if f.backend != nil {
		return *f.backend
	}
	return os.Getenv("TXMQ_BACKEND")
}

// openedBackend returns the command's backend, opening it on first use; nil with no backend
// set, or with the reason it could not be opened (a memory:// backend of another process
// included).
func (f *dbFlags) openedBackend(ctx context.Context) (core.Backend, error) {
	if f.triedBe {
		return f.be, f.beErr
	}
	f.triedBe = true
	raw := f.backendURL()
	if raw == "" {
		return nil, nil
	}
	f.be, f.beErr = openBackend(ctx, backendSetting, raw, false)
	if f.beErr != nil {
		f.be = nil
	}
	return f.be, f.beErr
}

// connect opens a pool on the app database and checks that it answers.
func connect(ctx context.Context, raw string) (*pgxpool.Pool, error) {
	if raw == "" {
		return nil, &usageError{msg: "no app database: set " + databaseSetting.String()}
	}
	if err := checkDatabaseURL(raw); err != nil {
		return nil, err
	}
	rest, err := databaseURL(raw, nil)
	if err != nil {
		return nil, &usageError{msg: message(core.RedactError(err, raw))}
	}
	pool, err := pgxpool.New(ctx, rest)
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("%s %s is not valid: %s", databaseSetting, core.Redact(raw), message(core.RedactError(err, raw)))}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, unreachable(databaseSetting, raw, "the app database", err)
	}
	return pool, nil
}

// errNoBackend is returned by commands that publish when no backend is configured.
var errNoBackend = errors.New("no backend to publish to: set --backend or TXMQ_BACKEND (for example redis://127.0.0.1:6379/0)")

// noBackend stands in when a command only reads: anything that would publish fails clearly.
type noBackend struct{}

func (noBackend) Publish(context.Context, core.OutgoingBatch) error { return errNoBackend }
func (noBackend) Fetch(context.Context, core.FetchRequest) ([]*core.Claim, error) {
	return nil, errNoBackend
}
func (noBackend) Ack(context.Context, *core.Claim) error { return errNoBackend }
func (noBackend) Retry(context.Context, *core.Claim, []byte, time.Duration) error {
	return errNoBackend
}
func (noBackend) Drop(context.Context, *core.Claim, string) error { return errNoBackend }
func (noBackend) Extend(context.Context, *core.Claim, time.Duration) error {
	return errNoBackend
}
func (noBackend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, errNoBackend
}
func (noBackend) Close() error { return nil }

// connectionHelp prints the connection flags, for the help of a command with subcommands
// (txmq dlq --help): every subcommand takes them.
func connectionHelp(w io.Writer) {
	fs := flag.NewFlagSet("connection", flag.ContinueOnError)
	fs.SetOutput(w)
	addDBFlags(fs, true)
	redactDefaults(fs)
	fmt.Fprintln(w, "\nConnection flags (every subcommand):")
	fs.PrintDefaults()
}
