package sqlite

import (
	"context"
	"database/sql"
	"net/url"
)

// FilePath returns the database file a sqlite:// backend URL names (relative to the working
// directory unless it starts with /), checked as Open checks it: an in-memory database or a
// URL without a file is an error wrapping core.ErrInvalidConfig. For tools (txmq migrate)
// that open the file themselves.
func FilePath(u *url.URL) (string, error) {
	path, _, _, _, err := parseURL(u)
	return path, err
}

// Applied returns the versions of the jobs tables' migrations recorded in db's file
// (Component in txmq_migrations), none for a file Migrate never ran on. For tools that report
// what Migrate applied.
func Applied(ctx context.Context, db *sql.DB) ([]int, error) {
	v, err := appliedVersions(ctx, db)
	if err != nil {
		return nil, classify("reading the applied migrations", err)
	}
	return v, nil
}
