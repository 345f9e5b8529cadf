package nats

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Open called directly (not through core.OpenBackend) never echoes a secret of its URL.
func TestOpenErrorsRedactSecrets(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"nats://hunter2@127.0.0.1:1?txmq_bogus=1",
		"nats://hunter2@127.0.0.1:1?txmq_replicas=nope",
		"nats://hunter2@",
		"nats://127.0.0.1:1?token=hunter2",
		"nats://u:hunter2@127.0.0.1:1?txmq_storage=disk",
		"nats://hunter2@127.0.0.1:1",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		be, err := Open(ctx, u)
		cancel()
		if err == nil {
			_ = be.Close()
			t.Errorf("Open(%s) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%s): error leaks the secret: %v", raw, err)
		}
	}
}
