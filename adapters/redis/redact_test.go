package redis

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
		"redis://hunter2@127.0.0.1:1/0?txmq_bogus=1",
		"redis://hunter2@127.0.0.1:1/0?txmq_lease=nope",
		"redis://u:hunter2@127.0.0.1:1/0?txmq_fetch_limit=0",
		"redis://127.0.0.1:1/0?password=hunter2",
		"rediss://:hunter2@127.0.0.1:1/nodb",
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
