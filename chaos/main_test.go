package chaos

import (
	"fmt"
	"os"
	"testing"
)

// roleEnv selects what a re-executed test binary does instead of running the tests.
const roleEnv = "CHAOS_ROLE"

// TestMain runs the role named by CHAOS_ROLE (a worker, the publisher or a nats-server) when
// the test binary was re-executed by TestChaos, and the tests otherwise.
func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var err error
	switch role {
	case "worker":
		err = runWorker()
	case "publisher":
		err = runPublisher()
	case "nats-server":
		err = runNATSServer()
	default:
		err = fmt.Errorf("unknown %s %q", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}
