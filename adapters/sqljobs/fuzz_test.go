package sqljobs

import (
	"net/url"
	"testing"

	"github.com/txmq/txmq/parity/urlfuzz"
)

// FuzzParseURL: the postgres:// parser (txmq_ parameters, then pgxpool.ParseConfig) never
// panics and refuses bad input with ErrInvalidConfig, never showing a secret.
func FuzzParseURL(f *testing.F) {
	urlfuzz.Seed(f, "postgres://u@127.0.0.1:5432/test?sslmode=disable",
		"postgresql://u:p@h/db?txmq_schema=jobs&txmq_migrate=false&txmq_lease=1s&txmq_fetch_limit=3&txmq_query_timeout=1s&txmq_abandoned_after=1h&txmq_reap_interval=-1s",
		"postgres://h/db?txmq_schema=1bad", "postgres://h/db?txmq_migrate=maybe", "postgres://h/db?TXMQ_LEASE=1s",
		"postgres://h/db?sslmode=bogus", "postgres://h/db?pool_max_conns=x", "postgres://h:99999/db", "postgres://h/db?txmq_bogus=1",
		"postgres://h1,h2:5433/db?target_session_attrs=read-write")
	f.Fuzz(func(t *testing.T, raw, secret string) {
		urlfuzz.Check(t, raw, secret, urlfuzz.Options{UserIsName: true, SecretParams: []string{"password", "sslpassword"}}, func(u *url.URL) error {
			_, _, _, err := parseConfig(u)
			return err
		})
	})
}
