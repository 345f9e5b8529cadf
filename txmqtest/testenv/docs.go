package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocWith returns the name and text of the first of README.md and docs/*.md (under the
// repository root root) that contains marker, failing t when none does: the tests that check a
// documented section find it wherever the README's sections moved to.
func DocWith(t testing.TB, root, marker string) (string, string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{filepath.Join(root, "README.md")}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), marker) {
			return f, string(b)
		}
	}
	t.Fatalf("neither README.md nor docs/*.md contains %q", marker)
	return "", ""
}
