package nats

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
		"nats://hunter2@127.0.0.1:1?txmq_bogus=1",
		"nats://hunter2@127.0.0.1:1?txmq_replicas=nope",
		"nats://hunter2@",
		"nats://127.0.0.1:1?token=hunter2",
		"nats://u:hunter2@127.0.0.1:1?txmq_storage=disk",
		"nats://hunter2@127.0.0.1:1",
	)
}
