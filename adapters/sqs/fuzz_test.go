package sqs

import (
	"net/url"
	"testing"

	"github.com/txmq/txmq/parity/urlfuzz"
)

// FuzzParseURL: the sqs:// parser never panics and refuses bad input with ErrInvalidConfig,
// never showing a secret (the secret key as password, or an access key alone).
func FuzzParseURL(f *testing.F) {
	urlfuzz.Seed(f, "sqs://", "sqs://eu-west-1?txmq_prefix=shop-", "awssqs://K:S@us-east-1?txmq_endpoint=http://127.0.0.1:4566",
		"sqs://r?txmq_region=x&txmq_max_native_delay=15m&txmq_max_message_bytes=1000&txmq_retry_max_attempts=3&txmq_request_timeout=5s",
		"sqs://r?txmq_endpoint=nope", "sqs://r?txmq_max_native_delay=-1s", "sqs://r?txmq_bogus=1", "sqs://r?txmq_overflow_dir=x")
	f.Fuzz(func(t *testing.T, raw, secret string) {
		dir := t.TempDir()
		urlfuzz.Check(t, raw, secret, urlfuzz.Options{}, func(u *url.URL) error {
			if q := u.Query(); q.Has("txmq_overflow_dir") {
				q.Set("txmq_overflow_dir", dir) // the parser creates the directory
				c := *u
				c.RawQuery = q.Encode()
				u = &c
			}
			_, err := optionsFromURL(u)
			return err
		})
	})
}
