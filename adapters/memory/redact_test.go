package memory

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
		"memory://hunter2@name?lease=nope",
		"memory://u:hunter2@name?bogus=1",
	)
}
