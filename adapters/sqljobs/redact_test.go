package sqljobs

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
		"postgres://u:hunter2@127.0.0.1:1/db?txmq_bogus=1",
		"postgres://u:hunter2@127.0.0.1:1/db?txmq_lease=nope",
		"postgres://u@127.0.0.1:1/db?sslmode=bogus&sslpassword=hunter2",
		"postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
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
