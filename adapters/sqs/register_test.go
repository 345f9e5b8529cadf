package sqs

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
)

func TestSchemesRegistered(t *testing.T) {
	t.Parallel()
	s := core.Schemes()
	for _, want := range []string{Scheme, SchemeAlt} {
		if !slices.Contains(s, want) {
			t.Fatalf("scheme %q not registered: %v", want, s)
		}
	}
}

func TestOptionsFromURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		check   func(*Options) bool
		wantErr string
	}{
		{url: "sqs://", check: func(o *Options) bool { return o.Region == "" && o.Credentials == nil }},
		{url: "sqs://eu-west-1", check: func(o *Options) bool { return o.Region == "eu-west-1" }},
		{url: "awssqs://?txmq_region=us-east-2&txmq_prefix=shop-", check: func(o *Options) bool { return o.Region == "us-east-2" && o.Prefix == "shop-" }},
		{url: "sqs://AKID:s3cret@us-east-1?txmq_endpoint=http://127.0.0.1:4566", check: func(o *Options) bool {
			c, err := o.Credentials.Retrieve(context.Background())
			return err == nil && c.AccessKeyID == "AKID" && c.SecretAccessKey == "s3cret" && o.Endpoint == "http://127.0.0.1:4566"
		}},
		{url: "sqs://?txmq_max_native_delay=3s&txmq_max_message_bytes=65536&txmq_retry_max_attempts=2&txmq_request_timeout=4s&txmq_idle_wait=5s", check: func(o *Options) bool {
			return o.MaxNativeDelay == 3*time.Second && o.MaxMessageBytes == 65536 && o.RetryMaxAttempts == 2 && o.RequestTimeout == 4*time.Second && o.IdleWait == 5*time.Second
		}},
		{url: "sqs://?txmq_overflow_dir=" + url.QueryEscape(t.TempDir()), check: func(o *Options) bool { _, ok := o.Overflow.(*DirOverflow); return ok }},
		{url: "sqs://?region=us-east-1", wantErr: "unknown parameter \"region\"; accepted: txmq_endpoint"},
		{url: "sqs://?txmq_endpoint=localhost", wantErr: "absolute URL"},
		{url: "sqs://?txmq_max_native_delay=soon", wantErr: "duration"},
		{url: "sqs://?txmq_max_message_bytes=-1", wantErr: "positive integer"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		o, err := optionsFromURL(u)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("%s: error %v; want ErrInvalidConfig mentioning %q", tc.url, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(o) {
			t.Errorf("%s: options %+v, error %v", tc.url, o, err)
		}
	}
}

// TestOpenNeverLeaksSecret: an opener error carries no password.
func TestOpenNeverLeaksSecret(t *testing.T) {
	t.Parallel()
	_, err := core.OpenBackend(context.Background(), "sqs://AKID:topsecret@us-east-1?txmq_prefix=bad%20prefix")
	if err == nil || !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("bad prefix: %v; want ErrInvalidConfig", err)
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("error leaks the secret: %v", err)
	}
}

// TestOpenEmulator opens a working backend from a URL against the emulator.
func TestOpenEmulator(t *testing.T) {
	t.Parallel()
	s := newSpace(t)
	raw := "sqs://test:test@us-east-1?txmq_endpoint=" + url.QueryEscape(s.endpoint) + "&txmq_prefix=" + s.prefix
	b, err := core.OpenBackend(context.Background(), raw)
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	defer b.Close()
	if err := b.Publish(context.Background(), batch("urlq", false, "k")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// TestURLParamNames: every parameter the URL parser consumes follows the scheme every adapter
// uses (txmq_<snake_case>).
func TestURLParamNames(t *testing.T) {
	t.Parallel()
	urlfuzz.CheckParamNames(t, urlParams, nil)
}
