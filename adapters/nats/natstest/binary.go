package natstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// serverModule is the module whose main package is the nats-server program.
const serverModule = "github.com/nats-io/nats-server/v2"

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// ServerBinary returns the path of a nats-server program built from the nats-server module
// this test binary uses (go.mod's version), without the race detector, once per machine and
// version: the file is kept in the temp directory and reused by later test processes.
//
// The cluster runs its nodes as separate processes of this program rather than embedded:
// embedded in a -race test binary, every node's Raft, store and routing code runs
// instrumented; on a loaded 2-core machine creating an R3 stream took 0.3 to 1.5 s there
// (about 70 ms with this program), and a node whose server statistics came late was taken for
// offline by the meta leader, which then refused R3 streams ("no suitable peers for
// placement, peer offline").
func ServerBinary() (string, error) {
	binaryOnce.Do(func() { binaryPath, binaryErr = buildServer() })
	return binaryPath, binaryErr
}

func buildServer() (string, error) {
	goBin, err := exec.LookPath("go") // go test puts its own go first on the PATH
	if err != nil {
		return "", fmt.Errorf("building nats-server: no go command on the PATH: %w", err)
	}
	// The version go.mod chooses (a test binary carries no dependency versions); go runs in the
	// test's working directory, inside the module.
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Version}}{{with .Replace}}-{{.Version}}-replaced{{end}}", serverModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", serverModule, err)
	}
	version := strings.TrimSpace(string(out))
	path := filepath.Join(os.TempDir(), fmt.Sprintf("txmq-nats-server-%s-%s_%s", version, runtime.GOOS, runtime.GOARCH))
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, serverModule)
	// Never with the test binary's -race; with the settings go vet compiles the server package
	// with, so that the build usually only links.
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %w\n%s", serverModule, err, out)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic: a concurrent build wins either way
		_ = os.Remove(tmp)
		return "", err
	}
	return path, nil
}
