package nats

import (
	"net/url"
	"testing"

	"github.com/txmq/txmq/parity/urlfuzz"
)

// FuzzParseURL: the nats:// parser never panics and refuses bad input with ErrInvalidConfig,
// never showing a secret (a token as user-info included).
func FuzzParseURL(f *testing.F) {
	urlfuzz.Seed(f, "nats://127.0.0.1:4222", "nats://tok@h:4222?txmq_prefix=app&txmq_replicas=3",
		"nats://h?txmq_storage=memory&txmq_max_age=1h&txmq_ack_wait=30s&txmq_timeout=5s&txmq_max_ack_pending=10&txmq_fetch_limit=5&txmq_name=n",
		"nats://h?txmq_servers=nats://b:4222,nats://u:p@c:4222", "nats://h?txmq_creds=/x.creds&txmq_nkey=/x.nk&txmq_tls_ca=/ca&txmq_tls_cert=/c&txmq_tls_key=/k",
		"nats://h?txmq_storage=disk", "nats://h?txmq_replicas=9", "nats://h?txmq_prefix=a.b", "nats://", "nats://h?token=x")
	f.Fuzz(func(t *testing.T, raw, secret string) {
		urlfuzz.Check(t, raw, secret, urlfuzz.Options{}, func(u *url.URL) error {
			_, _, err := parseURL(u)
			return err
		})
	})
}
