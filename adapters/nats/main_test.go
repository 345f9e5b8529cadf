package nats

import (
	"os"
	"testing"

	"github.com/txmq/txmq/adapters/nats/natstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	natstest.StopSharedNATS()
	os.Exit(code)
}
