package core

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
)

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

// registerPrefixTest registers TestOpenBackendErrorsHaveOnePrefix's schemes once per process
// (-count=2 runs the test twice).
var registerPrefixTest sync.Once

// An opener's error already starts with "txmq:" (its sentinel's text): OpenBackend's error has
// that prefix once, and still wraps the sentinel.
func TestOpenBackendErrorsHaveOnePrefix(t *testing.T) {
	t.Parallel()
	registerPrefixTest.Do(func() {
		RegisterBackend("prefixtest-invalid", func(context.Context, *url.URL) (Backend, error) {
			return nil, fmt.Errorf("%w: prefixtest backend URL: unknown parameter %q", ErrInvalidConfig, "bogus")
		})
		RegisterBackend("prefixtest-down", func(context.Context, *url.URL) (Backend, error) {
			return nil, fmt.Errorf("prefixtest: connect: %w: dial refused", ErrBackendUnavailable)
		})
	})
	for _, tt := range []struct {
		raw  string
		want error
	}{
		{"prefixtest-invalid://h/?bogus=1", ErrInvalidConfig},
		{"prefixtest-down://h", ErrBackendUnavailable},
	} {
		_, err := OpenBackend(context.Background(), tt.raw)
		if !errors.Is(err, tt.want) || strings.Count(err.Error(), "txmq:") != 1 || !strings.HasPrefix(err.Error(), "txmq: ") {
			t.Errorf("OpenBackend(%q) = %v: want one txmq: prefix, wrapping %v", tt.raw, err, tt.want)
		}
	}
}

// TestOpenBackendNamesTheImport: a scheme of this module's adapters that the program did not
// import fails with an error that names the import to add (core's tests import no adapter).
func TestOpenBackendNamesTheImport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, pkg string }{
		{"redis://127.0.0.1:6379/0", "github.com/txmq/txmq/adapters/redis"},
		{"postgres://u:secretpw@127.0.0.1/db", "github.com/txmq/txmq/adapters/sqljobs"},
		{"sqs://127.0.0.1:4566", "github.com/txmq/txmq/adapters/sqs"},
		{"nats://tok@127.0.0.1:4222", "github.com/txmq/txmq/adapters/nats"},
	} {
		_, err := OpenBackend(context.Background(), tc.url)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `import _ "`+tc.pkg+`"`) || !strings.Contains(err.Error(), "adapters/all") {
			t.Errorf("OpenBackend(%s) = %v; want ErrInvalidConfig naming import _ %q and adapters/all", Redact(tc.url), err, tc.pkg)
		}
		if strings.Contains(err.Error(), "secretpw") || strings.Contains(err.Error(), "tok@") {
			t.Errorf("OpenBackend(%s): the error shows a secret: %v", Redact(tc.url), err)
		}
	}
}
