package sqs

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
		"sqs://AKID:hunter2@us-east-1?txmq_bogus=1",
		"awssqs://hunter2@us-east-1?txmq_max_native_delay=nope",
		"sqs://AKID:hunter2@us-east-1?txmq_endpoint=nope",
	)
}
