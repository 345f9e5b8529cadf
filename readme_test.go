package txmq_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docFiles returns README.md and docs/*.md: the files whose fenced blocks tests check.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, files...)
}

// readmeBlock returns the first fenced block of kind lang after heading in whichever of
// README.md and docs/*.md holds heading.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, "\n"+heading+"\n")
		if i < 0 {
			continue
		}
		s = s[i:]
		open := "```" + lang + "\n"
		j := strings.Index(s, open)
		if j < 0 {
			t.Fatalf("%s: no %s block after %q", f, lang, heading)
		}
		s = s[j+len(open):]
		k := strings.Index(s, "```\n")
		if k < 0 {
			t.Fatalf("%s: the %s block after %q is not closed", f, lang, heading)
		}
		return s[:k]
	}
	t.Fatalf("neither README.md nor docs/*.md has a %q heading", heading)
	return ""
}

// goBlocks returns every ```go block of text.
func goBlocks(text string) []string {
	var out []string
	for _, b := range strings.Split(text, "```go\n")[1:] {
		if k := strings.Index(b, "```\n"); k >= 0 {
			out = append(out, b[:k])
		}
	}
	return out
}

// compiledDocSources are the files that hold, as compiled code, every Go block of README.md
// and docs/*.md; each has a test that compares its blocks with the docs and runs them:
// examples/quickstart (TestReadmeQuickStart), readme_snippets_test.go (TestReadmeBackendIsASetting,
// TestReadmeOrdering), readme_middleware_test.go (TestGuideMiddleware), txmqtest/readme_test.go (TestReadmeTestingYourApp) and
// parity/testdata/wrapped (TestReadmeAdapterSection, TestOutOfModuleAdapter).
var compiledDocSources = []string{
	"examples/quickstart/main.go",
	"readme_snippets_test.go",
	"readme_middleware_test.go",
	"txmqtest/readme_test.go",
	"parity/testdata/wrapped/wrapped.go",
	"parity/testdata/wrapped/wrapped_test.go",
}

// TestReadmeGoBlocksAreCompiled: every Go block of README.md and docs/*.md is text of a file
// that is compiled and whose test checks that block (compiledDocSources), as is or indented by
// one tab (a fragment of a function body). A new snippet in the docs fails here until it is
// put in one of those files with a test that runs it.
func TestReadmeGoBlocksAreCompiled(t *testing.T) {
	t.Parallel()
	var src []string
	for _, f := range compiledDocSources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, string(b))
	}
	all := strings.Join(src, "\n")
	indent := func(b string) string {
		lines := strings.Split(b, "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = "\t" + l
			}
		}
		return strings.Join(lines, "\n")
	}
	n := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range goBlocks(string(b)) {
			n++
			if !strings.Contains(all, block) && !strings.Contains(all, indent(block)) {
				t.Errorf("%s: this Go block is in no compiled file checked by a test (%s): put it in one, with a test that compares and runs it\n%s", f, strings.Join(compiledDocSources, ", "), block)
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d Go blocks in README.md and docs/*.md; want at least 5 (quick start, backend, ordering, testing your app, adapter)", n)
	}
}

// TestReadmeQuickStart: the README's Quick start is examples/quickstart/main.go verbatim, and
// running it prints what the README says it prints.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	prog, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if got := readmeBlock(t, "## Quick start", "go"); got != string(prog) {
		t.Fatalf("the README's Quick start differs from examples/quickstart/main.go: copy the file into the README")
	}
	want := readmeBlock(t, "## Quick start", "text")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./examples/quickstart")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run ./examples/quickstart: %v\n%s", err, stderr.String())
	}
	if string(out) != want {
		t.Fatalf("the Quick start printed\n%s\nthe README shows\n%s", out, want)
	}
}
