package sqs

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
		"sqs://AKID:hunter2@us-east-1?txmq_bogus=1",
		"awssqs://hunter2@us-east-1?txmq_max_native_delay=nope",
		"sqs://AKID:hunter2@us-east-1?txmq_endpoint=nope",
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
