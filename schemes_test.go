package txmq

import (
	"context"
	"fmt"
	"net/url"

	"github.com/txmq/txmq/core"
)

// The redis, sqs and nats adapters are modules of their own that require this one, so this
// package's tests cannot import them. The configuration tests name their schemes (TXMQ_BACKEND
// and TXMQ_DRAIN_BACKENDS are checked against the registered schemes): they get stand-ins that
// register the scheme and refuse to open. The adapters' own tests, and adapters/all's, open the
// real ones.
func init() {
	core.RegisterSchemes(func(_ context.Context, u *url.URL) (core.Backend, error) {
		return nil, fmt.Errorf("%w: %s:// is a stand-in in txmq's own tests; its adapter's module opens it", core.ErrInvalidConfig, u.Scheme)
	}, "redis", "rediss", "sqs", "awssqs", "nats")
}
