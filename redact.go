package txmq

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/txmq/txmq/core"
)

// dsnSecretRE finds secret keywords of a PostgreSQL keyword/value connection string
// ("host=h password='a b'"), with their value (quoted or not) in group 2.
var dsnSecretRE = regexp.MustCompile(`(?i)(\b[a-z_]*(?:` + strings.Join(core.SecretWords(), "|") + `)[a-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

// isDSN reports whether raw is a keyword/value connection string rather than a URL.
func isDSN(raw string) bool { return !strings.Contains(raw, "://") && strings.Contains(raw, "=") }

// redactURL returns raw with every secret replaced: the user-info password, and the values of
// query parameters (or, for a keyword/value connection string, keywords) that name a
// password, secret or token. A URL that does not parse gives a placeholder (it may still hold
// a password).
func redactURL(raw string) string {
	if isDSN(raw) {
		return dsnSecretRE.ReplaceAllString(raw, "${1}xxxxx")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable URL>"
	}
	changed := false
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, ok := strings.Cut(p, "=")
			if uk, err := url.QueryUnescape(k); err == nil {
				k = uk
			}
			if ok && core.SecretParam(k) {
				parts[i], changed = url.QueryEscape(k)+"=xxxxx", true
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if _, hasPassword := u.User.Password(); !hasPassword && !changed {
		return raw // nothing secret (and memory:// stays memory://, not memory:)
	}
	return u.Redacted()
}

// secrets returns the secret values raw holds (see redactURL), as written and unescaped.
func secrets(raw string) []string {
	var out []string
	add := func(v string) {
		if v = strings.Trim(v, "'"); v != "" && v != "xxxxx" {
			out = append(out, v)
		}
	}
	if isDSN(raw) {
		for _, m := range dsnSecretRE.FindAllStringSubmatch(raw, -1) {
			add(m[2])
			add(strings.ReplaceAll(strings.ReplaceAll(strings.Trim(m[2], "'"), `\'`, "'"), `\\`, `\`))
		}
		return out
	}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(url.UserPassword("", p).String()[1:]) // as escaped in the URL
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, ok := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if !ok || !core.SecretParam(k) {
			continue
		}
		add(v)
		if uv, err := url.QueryUnescape(v); err == nil {
			add(uv)
		}
	}
	return out
}

// scrub removes raw's secrets (and raw's user-info part) from an error text.
func scrub(msg, raw string) string {
	for _, sec := range secrets(raw) {
		msg = strings.ReplaceAll(msg, sec, "xxxxx")
	}
	if i := strings.Index(raw, "@"); i > 0 && !isDSN(raw) {
		msg = strings.ReplaceAll(msg, raw[:i], "<redacted>")
	}
	return msg
}

// scrubbedError is an error whose text has a URL's secrets removed (adapters may quote their
// URL, parameters included); it unwraps to the original, for errors.Is.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubbed returns err with raw's secrets removed from its text.
func scrubbed(err error, raw string) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{msg: scrub(err.Error(), raw), err: err}
}
