package nats

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/adapters/nats/natstest"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
	"github.com/txmq/txmq/txmqtest/testenv"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, servers, err string
		check             func(o *Options) bool
	}{
		{url: "nats://127.0.0.1:4222", servers: "nats://127.0.0.1:4222", check: func(o *Options) bool { return o.Prefix == "" && o.Replicas == 0 }},
		{url: "nats://u:secret@h:4222?txmq_prefix=app&txmq_replicas=3&txmq_storage=memory&txmq_max_age=24h&txmq_ack_wait=45s",
			servers: "nats://u:secret@h:4222",
			check: func(o *Options) bool {
				return o.Prefix == "app" && o.Replicas == 3 && o.MemoryStorage && o.MaxAge == 24*time.Hour && o.AckWait == 45*time.Second
			}},
		{url: "nats://a:4222?txmq_servers=nats://b:4222,nats://c:4222", servers: "nats://a:4222,nats://b:4222,nats://c:4222"},
		{url: "nats://a:4222,b:5222,c:6222?txmq_replicas=3", servers: "nats://a:4222,nats://b:5222,nats://c:6222", check: func(o *Options) bool { return o.Replicas == 3 }},
		{url: "nats://u:secret@a,b,c", servers: "nats://u:secret@a:4222,nats://u:secret@b:4222,nats://u:secret@c:4222"},
		{url: "nats://a:4222,,c:4222", err: "empty host"},
		{url: "nats://a:4222?txmq_creds=/x.creds&txmq_nkey=/seed&txmq_tls_ca=/ca.pem&txmq_tls_cert=/c.pem&txmq_tls_key=/k.pem&txmq_timeout=2s&txmq_name=svc&txmq_idle_pull=12s",
			servers: "nats://a:4222",
			check: func(o *Options) bool {
				return o.CredentialsFile == "/x.creds" && o.NKeySeedFile == "/seed" && o.RootCAFiles[0] == "/ca.pem" &&
					o.ClientCertFile == "/c.pem" && o.ClientKeyFile == "/k.pem" && o.Timeout == 2*time.Second && o.Name == "svc" && o.IdlePull == 12*time.Second
			}},
		{url: "nats://a:4222?txmq_max_ack_pending=5&txmq_fetch_limit=9&txmq_storage=file", servers: "nats://a:4222",
			check: func(o *Options) bool { return o.MaxAckPending == 5 && !o.MemoryStorage }}, // txmq_fetch_limit: accepted and ignored
		{url: "nats://a:4222?txmq_prefx=x", err: "unknown parameter \"txmq_prefx\"; accepted: txmq_ack_wait"},
		{url: "nats://a:4222?foo=1", err: "unknown parameter \"foo\""},
		{url: "nats://a:4222?txmq_replicas=0", err: "must be positive"},
		{url: "nats://a:4222?txmq_replicas=9", err: "Replicas 9"},
		{url: "nats://a:4222?txmq_storage=ssd", err: "want file or memory"},
		{url: "nats://a:4222?txmq_ack_wait=soon", err: "not a Go duration"},
		{url: "nats://a:4222?txmq_prefix=a.b", err: "Prefix \"a.b\""},
		{url: "nats:///?txmq_prefix=x", err: "no host"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		o, servers, err := parseURL(u)
		if tt.err != "" {
			if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want ErrInvalidConfig containing %q", tt.url, err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("%s: error leaks the password: %v", tt.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		if servers != tt.servers {
			t.Errorf("%s: servers %q, want %q", tt.url, servers, tt.servers)
		}
		if tt.check != nil && !tt.check(o) {
			t.Errorf("%s: options %+v", tt.url, *o)
		}
	}
}

func TestOpenBackendURL(t *testing.T) {
	t.Parallel()
	raw := natstest.NATSURL(t) + "?txmq_prefix=" + testenv.UniqueName("u")
	b, err := core.OpenBackend(context.Background(), raw)
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	defer b.Close()
	if err := b.Publish(context.Background(), core.OutgoingBatch{ID: "x", Queue: "q", Body: []byte("x")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if _, err := core.OpenBackend(context.Background(), "nats://u:hunter2@127.0.0.1:1?txmq_bogus=1"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad URL: %v (must fail without the password)", err)
	}
}

// TestURLParamNames: every parameter the URL parser consumes follows the scheme every adapter
// uses (txmq_<snake_case>).
func TestURLParamNames(t *testing.T) {
	t.Parallel()
	urlfuzz.CheckParamNames(t, urlParams, nil)
}
