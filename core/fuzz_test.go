package core

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// Fuzz targets: plain `go test` runs their seeds (f.Add and testdata/fuzz); scripts/fuzz runs
// each with -fuzz for a chosen time.

// redactForms builds texts holding secret (already marked) in every position Redact must hide.
// Each form holds the secret as given, except the unquoted connection-string one, which holds it
// without whitespace; the second result lists that secret.
func redactForms(scheme, user, secret string) (forms []string, unquoted string) {
	esc := url.QueryEscape(secret)
	hostURL := func(u *url.Userinfo, q string) string {
		return (&url.URL{Scheme: scheme, User: u, Host: "h:1", Path: "/db", RawQuery: q}).String()
	}
	unquoted = strings.Join(strings.Fields(secret), "")
	forms = []string{
		hostURL(url.UserPassword(user, secret), "txmq_prefix=p"),
		hostURL(nil, "password="+esc),
		hostURL(nil, "txmq_prefix=p&sslpassword="+esc+"&sslmode=disable"),
		hostURL(nil, "token="+esc),
		hostURL(nil, "txmq_secret_key="+esc),
		hostURL(nil, "txmq_nkey="+esc),
		hostURL(nil, "txmq_servers="+url.QueryEscape("nats://"+url.User(secret).String()+"@b:4222,nats://"+url.UserPassword("u", secret).String()+"@c:4222")),
		hostURL(nil, "txmq_endpoint="+url.QueryEscape((&url.URL{Scheme: "http", User: url.UserPassword("u", secret), Host: "e:1"}).String())),
		url.UserPassword(user, secret).String() + "@h:6379/0",
		"host=h user=u password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(secret) + "' dbname=d",
		"host=h sslpassword=" + unquoted + " port=1",
	}
	if !strings.Contains(user, "=") { // else it reads as a keyword/value connection string
		forms = append(forms, user+":"+secret+"@h:1")
	}
	// Written without escaping: the URL may no longer parse, or mean something else. (A secret
	// holding "?name=scheme://" unescaped cannot be told from a URL-valued parameter.)
	if !strings.Contains(secret, "://") {
		forms = append(forms, scheme+"://"+user+":"+secret+"@h:1/db")
	}
	if !strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql") {
		forms = append(forms, hostURL(url.User(secret), ""))
		if !strings.Contains(secret, ":") { // else the part before ":" is a user name, as written (and no "://")
			forms = append(forms, scheme+"://"+secret+"@h:1/db?x=1")
		}
	}
	return forms, unquoted
}

// Redact never panics on any text, and never shows a secret placed in any position it must
// hide (see redactForms), however the secret is written; RedactText removes it from a
// message quoting the text, and RedactError from an error.
func FuzzRedact(f *testing.F) {
	for _, s := range []struct{ scheme, user, secret, raw string }{
		{"redis", "u", "hunter2", "redis://u:hunter2@h:6379/0"},
		{"nats", "", "tok", "nats://tok@h:4222"},
		{"postgres", "app", "p@ss/w?rd#1", "host=h password='a b'"},
		{"sqs", "AKID", "s3:cr%et", "sqs://K:S@us-east-1?txmq_endpoint=http://127.0.0.1:4566"},
		{"memory", "", "", "memory://"},
		{"x", "a:b", " \t'\\\"", "%zz://u:p@h"},
		{"nosuch", "u", "a,b&c=d", "u:p@h:6379"},
	} {
		f.Add(s.scheme, s.user, s.secret, s.raw)
	}
	f.Fuzz(func(t *testing.T, scheme, user, secret, raw string) {
		_ = Redact(raw)
		_ = RedactText(raw, raw)
		if !schemeRE.MatchString(scheme) || strings.Contains(scheme+user, secretMark) || strings.ContainsAny(user, ":@/?#") {
			return
		}
		secret = secretMark + secret
		if strings.Contains(secret, Redacted) {
			return
		}
		forms, unquoted := redactForms(scheme, user, secret)
		for _, form := range forms {
			if got := Redact(form); strings.Contains(got, secretMark) {
				t.Fatalf("Redact(%q) = %q: the secret %q shows", form, got, secret)
			}
			sec := secret
			if strings.HasPrefix(form, "host=h sslpassword=") {
				sec = unquoted
			}
			if got := RedactText("failed: "+form+" "+sec, form); strings.Contains(got, sec) {
				t.Fatalf("RedactText(..., %q) = %q: the secret %q shows", form, got, sec)
			}
			if err := RedactError(errors.New("failed: "+sec), form); strings.Contains(err.Error(), sec) {
				t.Fatalf("RedactError(..., %q) = %v: the secret %q shows", form, err, sec)
			}
		}
	})
}

// secretMark starts every secret the redaction targets insert; it appears nowhere else, so any
// occurrence in an output is a leak of (a part of) the secret.
const secretMark = "Zq9"
