package redis

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		url     string
		prefix  string
		addr    string
		db      int
		tls     bool
		user    string
		wantErr string // substring; the error must wrap ErrInvalidConfig
	}{
		{url: "redis://127.0.0.1:6379/0", prefix: "txmq", addr: "127.0.0.1:6379"},
		{url: "redis://10.0.0.5/3?txmq_prefix=app&txmq_lease=5s&txmq_fetch_limit=7&dial_timeout=2s", prefix: "app", addr: "10.0.0.5:6379", db: 3},
		{url: "rediss://alice:s3cret@cache.example:6380/1?txmq_prefix=x", prefix: "x", addr: "cache.example:6380", db: 1, tls: true, user: "alice"},
		{url: "redis://:s3cret@127.0.0.1:6379/0?txmq_bogus=1", wantErr: `unknown parameter "txmq_bogus"; accepted txmq_ parameters: txmq_call_timeout, txmq_fetch_limit, txmq_goredis_logs, txmq_idle_recheck, txmq_lease, txmq_prefix`},
		{url: "redis://127.0.0.1/0?txmq_lease=-1s", wantErr: "txmq_lease"},
		{url: "redis://127.0.0.1/0?txmq_fetch_limit=x", wantErr: "txmq_fetch_limit"},
		{url: "redis://127.0.0.1/0?txmq_goredis_logs=maybe", wantErr: "txmq_goredis_logs"},
		{url: "redis://127.0.0.1/0?txmq_idle_recheck=0s", wantErr: "txmq_idle_recheck"},
		{url: "redis://127.0.0.1/0?txmq_prefix=a{b}", wantErr: "braces"},
		{url: "redis://:s3cret@127.0.0.1/0?no_such_option=1", wantErr: "no_such_option"},
		{url: "redis://127.0.0.1/notanumber", wantErr: "database"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			b, err := core.OpenBackend(ctx, tt.url)
			if tt.wantErr != "" {
				if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OpenBackend: %v; want ErrInvalidConfig mentioning %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenBackend: %v", err)
			}
			defer b.Close()
			be := b.(*Backend)
			o := be.rdb.(*goredis.Client).Options()
			if be.Prefix() != tt.prefix || o.Addr != tt.addr || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls || o.Username != tt.user {
				t.Fatalf("got prefix %q addr %s db %d tls %v user %q", be.Prefix(), o.Addr, o.DB, o.TLSConfig != nil, o.Username)
			}
		})
	}
}

// TestOpenURLWorks opens the test server by URL and round-trips a batch.
func TestOpenURLWorks(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	ro := testRedisOptions(t)
	b, err := core.OpenBackend(context.Background(), "redis://"+ro.Addr+"/0?txmq_prefix="+prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	be := b.(*Backend)
	publish(t, be, "q", "b1", time.Time{})
	if cs := fetch(t, be, all("q")); len(cs) != 1 {
		t.Fatalf("claimed %d, want 1", len(cs))
	}
}

// TestURLParamNames: every parameter the URL parser consumes follows the scheme every adapter
// uses (txmq_<snake_case>).
func TestURLParamNames(t *testing.T) {
	t.Parallel()
	urlfuzz.CheckParamNames(t, urlParams, nil)
}

// TestURLParamsSet: the txmq_ parameters that TestOpenURL does not look at set their Options.
func TestURLParamsSet(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("redis://127.0.0.1/0?txmq_call_timeout=2s&txmq_idle_recheck=12s&txmq_goredis_logs=true")
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if o.CallTimeout != 2*time.Second || o.IdleRecheck != 12*time.Second || !o.GoRedisLogs {
		t.Fatalf("got CallTimeout %v IdleRecheck %v GoRedisLogs %v; want 2s 12s true", o.CallTimeout, o.IdleRecheck, o.GoRedisLogs)
	}
}
