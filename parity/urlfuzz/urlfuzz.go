// Package urlfuzz is the shared body of the adapters' URL parser fuzz targets: a parser must
// never panic, must refuse bad input with an error wrapping core.ErrInvalidConfig, and must
// never show a secret (a password, a user-info token, a secret parameter) in that error.
package urlfuzz

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// Mark starts every secret Check inserts; seeds and inputs that hold it are skipped, so any
// occurrence in an error is a leak.
const Mark = "Zq9"

// Options says what a parser treats as secret.
type Options struct {
	// UserIsName: a user-info without a password is a user name (postgres), not a token, so
	// Check does not insert a lone token.
	UserIsName bool
	// SecretParams are query parameters the parser accepts whose value is a secret (e.g.
	// password for postgres); Check sets each to a secret.
	SecretParams []string
}

// Seed adds raw URLs (and a secret) to f's corpus.
func Seed(f *testing.F, raws ...string) {
	f.Helper()
	for _, r := range raws {
		f.Add(r, "hunter2")
	}
	f.Add("", "")
}

// Check runs parse on raw as given, then with secrets inserted in every position o allows,
// and fails t if parse panics (the fuzz engine reports it), returns an error that does not
// wrap core.ErrInvalidConfig, or an error holding the secret.
func Check(t *testing.T, raw, secret string, o Options, parse func(*url.URL) error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	if err := parse(u); err != nil && !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("parse(%q): error does not wrap core.ErrInvalidConfig: %v", raw, err)
	}
	if strings.Contains(raw, Mark) || strings.Contains(core.Redacted, secret) {
		return
	}
	secret = Mark + secret
	user := "u"
	if u.User != nil && u.User.Username() != "" && !strings.Contains(u.User.Username(), Mark) {
		user = u.User.Username()
	}
	var variants []*url.URL
	withPass := *u
	withPass.User = url.UserPassword(user, secret)
	variants = append(variants, &withPass)
	if !o.UserIsName {
		withToken := *u
		withToken.User = url.User(secret)
		variants = append(variants, &withToken)
	}
	for _, p := range o.SecretParams {
		withParam := *u
		q := withParam.Query()
		q.Set(p, secret)
		withParam.RawQuery = q.Encode()
		variants = append(variants, &withParam)
	}
	for _, v := range variants {
		err := parse(v)
		if err == nil {
			continue
		}
		if !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("parse(%q): error does not wrap core.ErrInvalidConfig: %v", v, err)
		}
		if strings.Contains(err.Error(), Mark) {
			t.Fatalf("parse(%q): the error shows the secret %q: %v", v, secret, err)
		}
	}
}

// OpenRedacts calls open (an adapter's Open, called directly rather than through
// core.OpenBackend) with each raw URL, every one of which must fail, and fails t when an error
// shows secret.
func OpenRedacts(t *testing.T, open func(context.Context, *url.URL) (core.Backend, error), secret string, raws ...string) {
	t.Helper()
	for _, raw := range raws {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		be, err := open(ctx, u)
		cancel()
		if err == nil {
			_ = be.Close()
			t.Errorf("Open(%s) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%s): error leaks the secret: %v", raw, err)
		}
	}
}
