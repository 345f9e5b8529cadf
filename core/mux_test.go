package core

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:hunter2@h:1/0", "redis://user:xxxxx@h:1/0"},
		{"postgres://u@h/db?password=hunter2&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"sqs://us-east-1?txmq_secret_key=abc&txmq_prefix=p", "sqs://us-east-1?txmq_prefix=p&txmq_secret_key=xxxxx"},
		{"nats://h:4222?token=abc", "nats://h:4222?token=xxxxx"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactURL(u); got != tt.want {
			t.Errorf("RedactURL(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestOpenBackendErrorsNeverShowSecrets(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"bogus://u:hunter2@h/?password=hunter2",
		"%zz://u:hunter2@h",
	} {
		_, err := OpenBackend(context.Background(), raw)
		if !errors.Is(err, ErrInvalidConfig) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenBackend(%q): %v", raw, err)
		}
	}
}
