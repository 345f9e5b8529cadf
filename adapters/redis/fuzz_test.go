package redis

import (
	"net/url"
	"testing"

	"github.com/txmq/txmq/parity/urlfuzz"
)

// FuzzParseURL: the redis:// parser (txmq_ parameters and go-redis's own) never panics and
// refuses bad input with ErrInvalidConfig, never showing a secret.
func FuzzParseURL(f *testing.F) {
	urlfuzz.Seed(f, "redis://127.0.0.1:6379/0", "rediss://u:p@h:6380/1?dial_timeout=1s&pool_size=3",
		"redis://h?txmq_prefix=a&txmq_lease=1s&txmq_fetch_limit=2&txmq_call_timeout=1s&txmq_goredis_logs=true",
		"redis://h?txmq_prefix={x}", "redis://h?txmq_lease=0s", "redis://h/notadb", "redis://h?txmq_bogus=1",
		"redis://h?protocol=9", "redis://h?client_name=%00", "redis://h:99999", "unix:///tmp/redis.sock?db=1")
	f.Fuzz(func(t *testing.T, raw, secret string) {
		urlfuzz.Check(t, raw, secret, urlfuzz.Options{SecretParams: []string{"password"}}, func(u *url.URL) error {
			_, _, err := parseURL(u)
			return err
		})
	})
}
