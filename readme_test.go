package txmq_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the first fenced block of kind lang after heading in README.md.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q heading", heading)
	}
	s = s[i:]
	open := "```" + lang + "\n"
	j := strings.Index(s, open)
	if j < 0 {
		t.Fatalf("README.md: no %s block after %q", lang, heading)
	}
	s = s[j+len(open):]
	k := strings.Index(s, "```\n")
	if k < 0 {
		t.Fatalf("README.md: the %s block after %q is not closed", lang, heading)
	}
	return s[:k]
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
