package sqljobs

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
		"postgres://u:hunter2@127.0.0.1:1/db?txmq_bogus=1",
		"postgres://u:hunter2@127.0.0.1:1/db?txmq_lease=nope",
		"postgres://u@127.0.0.1:1/db?sslmode=bogus&sslpassword=hunter2",
		"postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
	)
}
