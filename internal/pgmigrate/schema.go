package pgmigrate

import (
	"io/fs"
	"regexp"
)

var schemaRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// ValidSchema reports whether name is a schema name txmq's components accept: 1-50 letters,
// digits and '_', not starting with a digit (it also names their NOTIFY channels, whose
// length Postgres limits).
func ValidSchema(name string) bool { return schemaRE.MatchString(name) }

// Sub returns the migrations directory dir of an embedded file system; it panics if dir does
// not exist, which for a go:embed directory is a build mistake.
func Sub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
