package pgmigrate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Placeholder is replaced in migration SQL by the quoted target schema.
const Placeholder = "{{schema}}"

// Migration is one versioned SQL file.
type Migration struct {
	// Version is the file's number prefix, > 0 and unique within a component.
	Version int
	// Name is the file name, for errors and logs.
	Name string
	// SQL is the file's content, before the schema placeholder is substituted.
	SQL string
}

// DB is what Migrate needs: a *pgxpool.Pool or a *pgx.Conn.
type DB interface {
	// Begin starts a transaction.
	Begin(ctx context.Context) (pgx.Tx, error)
}

var fileRE = regexp.MustCompile(`^([0-9]+)_[A-Za-z0-9_.-]+\.sql$`)

// Load reads the migrations at the root of fsys (use fs.Sub for a subdirectory), sorted by
// version. Files not ending in .sql are ignored; a .sql file with a bad name or a duplicate
// version is an error.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("pgmigrate: reading migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgmigrate: migration file %q: name it NNNN_name.sql (for example 0002_add_index.sql)", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("pgmigrate: migration file %q: the version must be a number > 0", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("pgmigrate: migration files %q and %q share version %d: renumber one", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("pgmigrate: reading migration %q: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Render returns m's SQL with the schema placeholder replaced by the quoted schema.
func (m Migration) Render(schema string) string {
	return strings.ReplaceAll(m.SQL, Placeholder, pgx.Identifier{schema}.Sanitize())
}

// Migrate applies the pending migrations of component found in fsys to schema, creating the
// schema and its txmq_migrations table when missing. It returns the versions it applied (none
// when everything was already applied).
func Migrate(ctx context.Context, db DB, fsys fs.FS, component, schema string) ([]int, error) {
	if component == "" || schema == "" {
		return nil, errors.New("pgmigrate: Migrate needs a component name and a schema")
	}
	ms, err := Load(fsys)
	if err != nil {
		return nil, fmt.Errorf("%w (component %q)", err, component)
	}
	if err := bootstrap(ctx, db, schema); err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range ms {
		did, err := apply(ctx, db, m, component, schema)
		if err != nil {
			return applied, err
		}
		if did {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// Querier runs a query: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Querier interface {
	// Query runs sql with args.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Applied returns the versions of component recorded in schema, sorted; none if the schema or
// its migrations table does not exist yet.
func Applied(ctx context.Context, q Querier, component, schema string) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT version FROM `+table(schema)+` WHERE component = $1 ORDER BY version`, component)
	if err != nil {
		if isUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("pgmigrate: reading applied migrations of %q in schema %q: %w", component, schema, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		if isUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("pgmigrate: reading applied migrations of %q in schema %q: %w", component, schema, err)
	}
	return vs, nil
}

func table(schema string) string {
	return pgx.Identifier{schema, "txmq_migrations"}.Sanitize()
}

// lockKey is the advisory lock key of one (component, schema) pair. An empty component gives
// the schema-wide key used while creating the schema and the migrations table.
func lockKey(component, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("txmq/pgmigrate\x00"))
	h.Write([]byte(component))
	h.Write([]byte{0})
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// bootstrap creates the schema and the migrations table, under the schema-wide lock so that
// two components migrating the same schema at once do not race on CREATE ... IF NOT EXISTS.
func bootstrap(ctx context.Context, db DB, schema string) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("", schema)); err != nil {
			return fmt.Errorf("pgmigrate: locking schema %q: %w", schema, err)
		}
		sql := `CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize() + `;
CREATE TABLE IF NOT EXISTS ` + table(schema) + ` (
	component  text        NOT NULL,
	version    int         NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (component, version)
)`
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgmigrate: creating schema %q and its txmq_migrations table (does the database user have CREATE rights?): %w", schema, err)
		}
		return nil
	})
}

// apply runs m unless it is already recorded, all in one transaction under the component lock.
func apply(ctx context.Context, db DB, m Migration, component, schema string) (bool, error) {
	did := false
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(component, schema)); err != nil {
			return fmt.Errorf("pgmigrate: locking %q migrations in schema %q: %w", component, schema, err)
		}
		var exists bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table(schema)+` WHERE component = $1 AND version = $2)`,
			component, m.Version).Scan(&exists)
		if err != nil {
			return fmt.Errorf("pgmigrate: checking %q migration %s in schema %q: %w", component, m.Name, schema, err)
		}
		if exists {
			return nil
		}
		if _, err := tx.Exec(ctx, m.Render(schema)); err != nil {
			return fmt.Errorf("pgmigrate: %q migration %s in schema %q failed and was rolled back; fix the database or the file and run Migrate again: %w", component, m.Name, schema, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+table(schema)+` (component, version) VALUES ($1, $2)`, component, m.Version); err != nil {
			return fmt.Errorf("pgmigrate: recording %q migration %s in schema %q: %w", component, m.Name, schema, err)
		}
		did = true
		return nil
	})
	return did, err
}

// isUndefinedTable reports a missing schema or table (SQLSTATE 3F000 or 42P01).
func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}

func inTx(ctx context.Context, db DB, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgmigrate: beginning a transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgmigrate: committing: %w", err)
	}
	return nil
}
