package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/txmq/txmq/adapters/sqlite"
	"github.com/txmq/txmq/core"
)

// isSQLiteBackend reports whether backendURL is a sqlite:// backend, whose jobs tables live in
// the file it names (not in the app database).
func isSQLiteBackend(backendURL string) bool {
	lower := strings.ToLower(backendURL)
	return strings.HasPrefix(lower, "sqlite:") || strings.HasPrefix(lower, "sqlite3:")
}

// migrateSQLiteJobs creates or upgrades the jobs tables in the file a sqlite:// backend URL
// names and says which migrations it applied, as runMigrate does per component.
func migrateSQLiteJobs(ctx context.Context, backendURL string, stdout io.Writer) error {
	u, err := url.Parse(backendURL)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("%s %s does not parse: %v", backendSetting, core.Redact(backendURL), core.RedactError(err, backendURL))}
	}
	path, err := sqlite.FilePath(u)
	if err != nil {
		return err
	}
	db, err := sqlite.OpenDB(path, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	before, err := sqlite.Applied(ctx, db)
	if err != nil {
		return err
	}
	if err := sqlite.Migrate(ctx, db, nil); err != nil {
		return err
	}
	after, err := sqlite.Applied(ctx, db)
	if err != nil {
		return err
	}
	var applied []string
	for _, v := range after {
		if !slices.Contains(before, v) {
			applied = append(applied, fileOf(sqlite.Migrations(), v))
		}
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "%s: file %s is up to date (%d migrations, none to apply)\n", sqlite.Component, path, len(after))
		return nil
	}
	fmt.Fprintf(stdout, "%s: applied %d migration(s) in file %s: %s\n", sqlite.Component, len(applied), path, strings.Join(applied, ", "))
	return nil
}
