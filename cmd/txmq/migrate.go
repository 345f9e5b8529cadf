package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register(&command{name: "migrate", summary: "create or upgrade txmq's tables in the app database (says what it applied)", run: runMigrate})
}

const migrateSynopsis = `migrate [--database-url URL] [--schema NAME] [--backend URL]

Creates or upgrades txmq's tables in the app database and says, per component, which
migrations it applied ("up to date" when none). The outbox (with dead letters, pause marks,
schedules and rate limits) and the ledger are always migrated; the jobs tables (component
sqljobs) only when the backend (--backend or TXMQ_BACKEND) is postgres://, the one backend
that keeps its jobs in the app database: a Redis, SQS or NATS backend needs none. With a
sqlite:// backend the jobs tables are created in the file it names (component sqlite_jobs),
and no app database is needed for that.`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", migrateSynopsis, stderr)
	f := addDBFlags(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *f.backend != "" {
		if err := checkBackendURL(backendSetting, *f.backend, true); err != nil {
			return err
		}
	}
	if isSQLiteBackend(*f.backend) { // its jobs tables live in its own file
		if err := migrateSQLiteJobs(ctx, *f.backend, stdout); err != nil {
			return err
		}
		if *f.url == "" {
			return nil
		}
	}
	if *f.url == "" {
		return &usageError{msg: "no app database: set --database-url or TXMQ_DATABASE_URL (or --backend sqlite://FILE to create a SQLite file's jobs tables)"}
	}
	if err := f.resolveSchema(nil); err != nil { // the backend's txmq_schema counts too
		return err
	}
	if db, u, ok := otherDatabase(*f.url); ok {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := db.Migrate(cctx, u, *f.schema); err != nil {
			return fmt.Errorf("migrating the outbox tables of %s: %w", u.Scheme, core.RedactError(err, *f.url))
		}
		where := fmt.Sprintf("database %q (%s)", *f.schema, u.Scheme)
		if s := strings.ToLower(u.Scheme); s == "sqlite" || s == "sqlite3" {
			where = "file " + u.Opaque + u.Host + u.Path + " (sqlite)" // one of them is set
		}
		fmt.Fprintf(stdout, "%s: the outbox and dead-letter tables (and the pause, schedule, rate-limit and heartbeat tables) of %s are up to date; the ledger needs PostgreSQL\n", outbox.Component, where)
		return nil
	}
	pool, err := connect(ctx, *f.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, m := range migrators {
		if skip := m.skip(*f.backend); skip != "" {
			fmt.Fprintf(stdout, "%s: skipped: %s\n", m.name, skip)
			continue
		}
		before, err := appliedVersions(cctx, pool, m.name, *f.schema)
		if err != nil {
			return err
		}
		if err := m.migrate(cctx, pool, *f.schema); err != nil {
			return fmt.Errorf("migrating %s: %w", m.name, err)
		}
		after, err := appliedVersions(cctx, pool, m.name, *f.schema)
		if err != nil {
			return err
		}
		var applied []string
		for _, v := range after {
			if !slices.Contains(before, v) {
				applied = append(applied, fileOf(m.files(), v))
			}
		}
		if len(applied) == 0 {
			fmt.Fprintf(stdout, "%s: schema %q is up to date (%d migrations, none to apply)\n", m.name, *f.schema, len(after))
			continue
		}
		fmt.Fprintf(stdout, "%s: applied %d migration(s) in schema %q: %s\n", m.name, len(applied), *f.schema, strings.Join(applied, ", "))
	}
	return nil
}

// migrator is one component with tables in the app database.
type migrator struct {
	name    string
	files   func() fs.FS
	migrate func(ctx context.Context, pool *pgxpool.Pool, schema string) error
	// skip returns why the component is not needed with this backend URL, or "".
	skip func(backendURL string) string
}

func always(string) string { return "" }

var migrators = []migrator{
	{name: outbox.Component, files: outbox.Migrations, skip: always, migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return outbox.Migrate(ctx, pool, &outbox.Options{Schema: schema})
	}},
	{name: ledger.Component, files: ledger.Migrations, skip: always, migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return ledger.Migrate(ctx, pool, &ledger.Options{Schema: schema})
	}},
	{name: sqljobs.Component, files: sqljobs.Migrations, skip: jobsTablesNeeded, migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return sqljobs.Migrate(ctx, pool, &sqljobs.Options{Schema: schema})
	}},
}

// jobsTablesNeeded says why the sqljobs tables are not needed: only a postgres:// backend
// keeps its jobs in the app database.
func jobsTablesNeeded(backendURL string) string {
	scheme, _, _ := strings.Cut(strings.ToLower(backendURL), "://")
	switch {
	case backendURL == "":
		return "no backend is set (--backend or TXMQ_BACKEND); the jobs tables are for a postgres:// backend, set it to create them"
	case scheme == "postgres" || scheme == "postgresql":
		return ""
	}
	return fmt.Sprintf("the backend %s keeps its own jobs; the jobs tables are for a postgres:// backend", core.Redact(backendURL))
}

// appliedVersions returns the migration versions of component recorded in schema; none when
// the schema or its txmq_migrations table does not exist yet.
func appliedVersions(ctx context.Context, pool *pgxpool.Pool, component, schema string) ([]int, error) {
	rows, err := pool.Query(ctx, `SELECT version FROM `+pgx.Identifier{schema, "txmq_migrations"}.Sanitize()+` WHERE component = $1 ORDER BY version`, component)
	if err == nil {
		var vs []int
		vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
		if err == nil {
			return vs, nil
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
		return nil, nil
	}
	return nil, fmt.Errorf("reading the applied %s migrations in schema %q: %w", component, schema, err)
}

// fileOf returns the name of version v's migration file in files, or the version itself.
func fileOf(files fs.FS, v int) string {
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if n, err := strconv.Atoi(num); ok && err == nil && n == v && path.Ext(e.Name()) == ".sql" {
			return e.Name()
		}
	}
	return fmt.Sprintf("version %d", v)
}
