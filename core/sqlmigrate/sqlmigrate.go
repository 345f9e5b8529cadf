// Package sqlmigrate reads the embedded migration files of the SQL adapters (NNNN_name.sql),
// splits them into statements, and applies those a migrations table does not record yet
// (Apply), for each adapter's own migration runner, which creates that table and serialises
// the processes migrating at once in its database's way.
package sqlmigrate

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// File is one NNNN_name.sql migration.
type File struct {
	Name    string
	Version int
	SQL     string
}

// List returns the migrations of files (NNNN_name.sql at its root) in version order.
func List(files fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: e.Name(), Version: v, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Statements splits a migration file into statements: each ends with ';' at the end of a
// line; comment lines are dropped.
func Statements(file string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(file, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
