package memory

import (
	"net/url"
	"testing"

	"github.com/txmq/txmq/parity/urlfuzz"
)

// FuzzParseURL: the memory:// parser never panics and refuses bad input with ErrInvalidConfig,
// never showing a secret.
func FuzzParseURL(f *testing.F) {
	urlfuzz.Seed(f, "memory://", "memory://name", "memory:name", "memory://n?lease=1s&fetch_limit=2&seed=3", "memory://n?txmq_lease=1s&txmq_fetch_limit=2&txmq_seed=3", "memory://?lease=1s&txmq_lease=2s",
		"memory://?lease=-1s", "memory://?fetch_limit=x", "memory://?bogus=1", "memory://?seed=18446744073709551616")
	f.Fuzz(func(t *testing.T, raw, secret string) {
		urlfuzz.Check(t, raw, secret, urlfuzz.Options{}, func(u *url.URL) error {
			_, err := optionsFromQuery(u)
			return err
		})
	})
}
