package pgmigrate

import (
	"fmt"
	"io/fs"
	"regexp"

	"github.com/txmq/txmq/core"
)

// DefaultSchema is the schema holding txmq's tables (the outbox's, the dead letters', the
// sqljobs adapter's) unless a component's Options.Schema says otherwise.
const DefaultSchema = "txmq"

var schemaRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// ValidSchema reports whether name is a schema name txmq's components accept: 1-50 letters,
// digits and '_', not starting with a digit (it also names their NOTIFY channels, whose
// length Postgres limits).
func ValidSchema(name string) bool { return schemaRE.MatchString(name) }

// Schema returns a component's Options.Schema: name, or DefaultSchema when it is empty. A name
// ValidSchema refuses is an error wrapping core.ErrInvalidConfig that starts with component.
func Schema(component, name string) (string, error) {
	if name == "" {
		return DefaultSchema, nil
	}
	if !ValidSchema(name) {
		return name, fmt.Errorf("%w: %s: Options.Schema %q: use 1-50 characters of letters, digits and '_', not starting with a digit", core.ErrInvalidConfig, component, name)
	}
	return name, nil
}

// Sub returns the migrations directory dir of an embedded file system; it panics if dir does
// not exist, which for a go:embed directory is a build mistake.
func Sub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
