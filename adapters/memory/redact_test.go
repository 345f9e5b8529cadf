package memory

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
		"memory://hunter2@name?lease=nope",
		"memory://u:hunter2@name?bogus=1",
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
