package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoInternalImports: the command is a module of its own, versioned apart from the txmq
// module it links (issue 29), so it uses the txmq module's public API only. A package under
// github.com/txmq/txmq/internal/ would tie each command release to one txmq commit: whatever
// the command needs is promoted into a public home (core/envelope, outbox, ...) instead.
func TestNoInternalImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Go files: run the test from cmd/txmq", len(files))
	}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/txmq/txmq/") && strings.Contains(path+"/", "/internal/") {
				t.Errorf("%s imports %s: the command uses the txmq module's public API only; promote what it needs", f, path)
			}
		}
	}
}
