package parity

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestOutOfModuleAdapter proves that an adapter written in another module can run the whole
// suite through exported API only: it builds a throwaway module under a temp dir whose package
// wraps the memory backend under a scheme of its own (testdata/wrapped, the "Writing an
// adapter" walk-through of docs/adapters.md), and runs its TestParity with go test, offline
// (GOPROXY=off: its go.mod requires what this repository's does, so every module it needs is in
// the module cache once this repository's tests have built).
func TestOutOfModuleAdapter(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a module of its own; not under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The transaction properties need the database: skipped locally, a failure under CI=true.
	pg := testenv.PostgresURL(t)

	// The throwaway module requires what this repository requires (the same versions), so its
	// module graph is the one this repository's own build already loaded: with lazy module
	// loading nothing beyond it is looked up, and the run needs no network and no go mod tidy
	// (tidy would load the whole unpruned graph, whose go.mod files a fresh machine's module
	// cache does not hold).
	rootMod := mustRead(t, filepath.Join(root, "go.mod"))
	i := strings.Index(rootMod, "\ngo ")
	if i < 0 {
		t.Fatal("go.mod has no go line")
	}
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "go.mod"), "module example.com/wrapped\n"+rootMod[i:]+"\n"+
		"require github.com/txmq/txmq v0.0.0\n\n"+
		"replace github.com/txmq/txmq => "+root+"\n")
	mustWrite(t, filepath.Join(dir, "go.sum"), mustRead(t, filepath.Join(root, "go.sum")))
	for _, f := range []string{"wrapped.go", "wrapped_test.go"} {
		mustWrite(t, filepath.Join(dir, f), mustRead(t, filepath.Join("testdata", "wrapped", f)))
	}
	summary := filepath.Join(dir, "summary.txt")

	timeout := 10 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = time.Until(dl) - 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	env := append(os.Environ(),
		"GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off",
		// The database reaches the suite through parity.Options only: the environment variable
		// points nowhere, and a skipped property fails.
		"WRAPPED_POSTGRES_URL="+pg,
		"TXMQ_POSTGRES_URL=postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"TXMQ_REQUIRE_SERVICES=1",
		"TXMQ_PARITY_SUMMARY="+summary,
	)
	run := func(args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the out-of-module adapter (%s): %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}
	run("test", "-count=1", "./...")

	// The whole suite ran, and every property passed (none skipped).
	want := 0
	for _, p := range props {
		want++
		if p.dup {
			want++
		}
	}
	line := strings.TrimSpace(mustRead(t, summary))
	m := regexp.MustCompile(`^parity\[wrapped\]: (\d+) properties ran, (\d+) passed, 0 failed \(\d+ s\)$`).FindStringSubmatch(line)
	if m == nil || m[1] != strconv.Itoa(want) || m[2] != m[1] {
		t.Fatalf("summary of the out-of-module run: %q; want %s", line, fmt.Sprintf("parity[wrapped]: %d properties ran, %d passed, 0 failed (N s)", want, want))
	}
}

// TestReadmeAdapterSection: every Go block of the "Writing an adapter" section (in
// docs/adapters.md, or wherever README.md and docs/*.md hold it) is text of the adapter that
// TestOutOfModuleAdapter builds, so the walk-through compiles.
func TestReadmeAdapterSection(t *testing.T) {
	name, doc := testenv.DocWith(t, "..", "\n## Writing an adapter\n")
	section := doc[strings.Index(doc, "\n## Writing an adapter\n")+1:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	src := mustRead(t, filepath.Join("testdata", "wrapped", "wrapped.go")) +
		mustRead(t, filepath.Join("testdata", "wrapped", "wrapped_test.go"))
	blocks := strings.Split(section, "```go\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("the Writing an adapter section has no go block")
	}
	for _, b := range blocks {
		b = b[:strings.Index(b, "```\n")]
		if !strings.Contains(src, b) {
			t.Errorf("this block of %s's Writing an adapter section is not in parity/testdata/wrapped: copy it from there\n%s", name, b)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
