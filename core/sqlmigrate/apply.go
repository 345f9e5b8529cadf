package sqlmigrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
)

// Conn runs statements and queries on one connection: a *sql.Conn (or a *sql.Tx).
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Apply applies the migrations of files (NNNN_name.sql at its root, List) that table does
// not record for component yet, in version order, and records each once all its statements
// ran. table is the migrations table as statements on c name it (schema-qualified or not),
// with the columns component and version; the caller creates it, and serialises processes
// migrating at once (a lock, a transaction). rewrite, if not nil, changes a file's SQL before
// it is split into statements (a schema's qualifier put in). Apply stops at the first error:
// the migrations before it stay recorded.
func Apply(ctx context.Context, c Conn, table, component string, files fs.FS, rewrite func(string) string) error {
	applied, err := appliedVersions(ctx, c, table, component)
	if err != nil {
		return err
	}
	list, err := List(files)
	if err != nil {
		return err
	}
	for _, f := range list {
		if applied[f.Version] {
			continue
		}
		text := f.SQL
		if rewrite != nil {
			text = rewrite(text)
		}
		for _, stmt := range Statements(text) {
			if _, err := c.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", f.Name, err)
			}
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO "+table+" (component, version) VALUES (?, ?)", component, f.Version); err != nil {
			return fmt.Errorf("recording migration %s: %w", f.Name, err)
		}
	}
	return nil
}

// appliedVersions returns the versions table records for component.
func appliedVersions(ctx context.Context, c Conn, table, component string) (map[int]bool, error) {
	rows, err := c.QueryContext(ctx, "SELECT version FROM "+table+" WHERE component = ?", component)
	if err != nil {
		return nil, err
	}
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return applied, nil
}
