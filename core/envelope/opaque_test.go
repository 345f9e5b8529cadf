package envelope_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAdaptersNeverDecodeTheEnvelope: no adapter (adapters/*, in this module or a module of its
// own) looks inside a batch's Body. Its non-test code imports neither the engine's envelope
// codec (internal/envelope) nor a package that decodes envelopes, and of this package it uses
// Split only, which takes and returns whole core.OutgoingBatch values. Tests may build and
// decode bodies (parity.EncodeBatch, parity.DecodeBatch).
func TestAdaptersNeverDecodeTheEnvelope(t *testing.T) {
	t.Parallel()
	const (
		codec = "github.com/txmq/txmq/internal/envelope"
		self  = "github.com/txmq/txmq/core/envelope"
	)
	files, err := filepath.Glob(filepath.Join("..", "..", "adapters", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked, splits := 0, 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		local := ""
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == codec || strings.HasPrefix(path, codec+"/"):
				t.Errorf("%s imports %s: adapters never decode a batch's Body; use core/envelope.Split, or ask for what you need in core.OutgoingBatch", f, path)
			case path == self:
				local = "envelope"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
				if sel.Sel.Name != "Split" {
					t.Errorf("%s: %s.%s: of core/envelope an adapter uses Split only", fset.Position(sel.Pos()), local, sel.Sel.Name)
				}
				splits++
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d adapter files under ../../adapters; the layout changed: fix this test", checked)
	}
	if splits == 0 {
		t.Errorf("no adapter calls envelope.Split any more: if none needs it, say so in this test and the package doc")
	}
}
