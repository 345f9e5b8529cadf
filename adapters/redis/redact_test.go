package redis

import (
	"context"
	"net/url"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
)

// Open called directly (not through core.OpenBackend) never echoes a secret of its URL.
func TestOpenErrorsRedactSecrets(t *testing.T) {
	t.Parallel()
	open := func(ctx context.Context, u *url.URL) (core.Backend, error) { return Open(ctx, u) }
	urlfuzz.OpenRedacts(t, open, "hunter2",
		"redis://hunter2@127.0.0.1:1/0?txmq_bogus=1",
		"redis://hunter2@127.0.0.1:1/0?txmq_lease=nope",
		"redis://u:hunter2@127.0.0.1:1/0?txmq_fetch_limit=0",
		"redis://127.0.0.1:1/0?password=hunter2",
		"rediss://:hunter2@127.0.0.1:1/nodb",
	)
}
