package nats

import (
	"os"
	"testing"

	"github.com/txmq/txmq/internal/testenv/natsenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	natsenv.StopSharedNATS()
	os.Exit(code)
}
