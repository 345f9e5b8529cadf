package txmq

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

// FuzzConfigFromEnviron: reading the configuration from any environment never panics, refuses
// bad values with an error wrapping core.ErrInvalidConfig, and never shows a secret placed in
// the backend, drain or database URL (as a password, or a secret parameter).
func FuzzConfigFromEnviron(f *testing.F) {
	for _, s := range [][7]string{
		{"memory://", "", "", "", "", "", "hunter2"},
		{"redis://u:p@127.0.0.1:6379/0", "postgres://u@h/db,nats://tok@h:4222", "postgres://u@h/db?sslmode=disable", "jobs", "false", "2s", "hunter2"},
		{"nosuch://h", "memory://", "host=h password='x y'", "1bad", "maybe", "-1s", ""},
		{"u:p@h:6379", "memory://a,memory://a", "%zz", "", "true", "nope", "x"},
		{"", ",,", "postgres://h:99999/db", "a", "1", "1h", "p@ss/w?rd#"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	f.Fuzz(func(t *testing.T, backend, drain, db, schema, migrate, interval, secret string) {
		environ := func(backend, drain, db string) []string {
			return []string{
				EnvBackend + "=" + backend, EnvDrainBackends + "=" + drain, EnvDatabaseURL + "=" + db,
				EnvSchema + "=" + schema, EnvMigrate + "=" + migrate, EnvDrainCheckInterval + "=" + interval,
			}
		}
		if _, err := configFromEnviron(environ(backend, drain, db)); err != nil && !errors.Is(err, core.ErrInvalidConfig) {
			t.Fatalf("error does not wrap ErrInvalidConfig: %v", err)
		}
		const mark = "Zq9"
		var envs [][]string
		all := backend + drain + db + schema + migrate + interval
		if strings.Contains(all, mark) || strings.Contains(core.Redacted, secret) {
			return
		}
		secret = mark + secret
		if db == "" || keywordValue.MatchString(db) {
			// A keyword/value connection string: add a quoted password.
			envs = append(envs, environ(backend, drain, strings.TrimSpace(db+" password='"+strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(secret)+"'")))
		}
		for _, env := range append(envs, [][]string{
			environ(withSecret(backend, secret), drain, db),
			environ(backend, withSecret(drain, secret), db),
			environ(backend, drain, withSecret(db, secret)),
		}...) {
			if _, err := configFromEnviron(env); err != nil && strings.Contains(err.Error(), mark) {
				t.Fatalf("configFromEnviron(%q): the error shows the secret: %v", env, err)
			}
		}
	})
}

// keywordValue matches a keyword/value connection string (host=h ...).
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// withSecret returns raw with secret as its password (a URL that parses), or as a password
// parameter.
func withSecret(raw, secret string) string {
	if u, err := url.Parse(raw); err == nil && strings.Contains(raw, "://") && !strings.Contains(raw, ",") {
		user := "u"
		if u.User != nil && u.User.Username() != "" {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, secret)
		return u.String()
	}
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + "password=" + url.QueryEscape(secret)
}
