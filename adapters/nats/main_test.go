package nats

import (
	"os"
	"testing"

	"github.com/txmq/txmq/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedNATS()
	os.Exit(code)
}
