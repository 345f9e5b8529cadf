package core

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted is what Redact writes in place of a secret.
const Redacted = "xxxxx"

// Redact returns raw, the text naming a backend or a database, with every secret it holds
// replaced by Redacted, for logs and errors. It is the one redaction rule of txmq: core, the
// root package, drain, the CLI and every adapter use it (or RedactURL, RedactText and
// RedactError, which apply the same rule). It never panics and accepts any text:
//
//   - scheme://user:password@host...: the password is replaced (user:xxxxx@host).
//   - scheme://info@host... (user-info without a password): the whole user-info is replaced
//     (xxxxx@host), since for NATS (nats://TOKEN@host), Redis and others it may be a token.
//     Only postgres:// and postgresql:// keep it: there it is the role name, which libpq's
//     own errors quote anyway.
//   - Query parameters whose name holds a secret word (see SecretWords: password, sslpassword,
//     token, secret, key, nkey, creds, auth, ...; names are compared percent-decoded and
//     case-insensitively) have their value replaced. Other parameter values that hold URLs
//     with user-info (nats' txmq_servers, sqs' txmq_endpoint) are redacted by this same rule.
//   - A fragment (#...) is replaced whole.
//   - A PostgreSQL keyword/value connection string ("host=h user=u password='a b'") has the
//     values of its secret keywords replaced, quoted or not (an unterminated quote runs to the
//     end).
//   - Text without a scheme (user:pass@host:6379, TOKEN@host) or that does not parse as a URL
//     (a bad escape or port): everything before its last "@" is replaced, since its structure
//     cannot be trusted; the rest is kept, its query redacted as above.
//
// Percent-encoded secrets are handled: the text is never decoded into the output, and
// RedactText removes a secret both as written and decoded.
func Redact(raw string) string {
	out, _ := redactSecrets(raw)
	return out
}

// RedactURL returns Redact(u.String()): u with its secrets replaced, for logs and errors of
// code that holds a parsed URL (such as an adapter's Opener).
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	s := u.String()
	if u.Opaque == "" && u.Scheme != "" && !strings.HasPrefix(s, u.Scheme+"://") {
		// url.URL.String drops the "//" of an empty authority (memory:// gives memory:).
		s = u.Scheme + "://" + strings.TrimPrefix(s, u.Scheme+":")
	}
	return Redact(s)
}

// RedactText returns text (typically a driver's or parser's error message) with every secret
// that raw holds (see Redact) replaced by Redacted, each as written in raw and percent- or
// quote-decoded, longest first. Use it where a message may quote raw or a part of it.
func RedactText(text, raw string) string {
	_, secrets := redactSecrets(raw)
	if len(secrets) == 0 {
		return text
	}
	// Mark every occurrence of every secret (overlapping ones too), then write each marked
	// run once as Redacted: a replacement is never searched again, and the work is linear in
	// the text for each secret.
	cover := make([]int, len(text)+1)
	found := false
	for _, sec := range secrets {
		for i := 0; i+len(sec) <= len(text); {
			j := strings.Index(text[i:], sec)
			if j < 0 {
				break
			}
			at := i + j
			i = at + 1
			if len(sec) < shortSecret && (wordBefore(text, at) || wordByte(text, at+len(sec))) {
				continue // a short secret inside a word ("p" in "db.example") is not it
			}
			cover[at]++
			cover[at+len(sec)]--
			found = true
		}
	}
	if !found {
		return text
	}
	var b strings.Builder
	depth, inRun := 0, false
	for i := 0; i < len(text); i++ {
		depth += cover[i]
		switch {
		case depth > 0 && !inRun:
			b.WriteString(Redacted)
			inRun = true
		case depth == 0:
			b.WriteByte(text[i])
			inRun = false
		}
	}
	return b.String()
}

// RedactError returns err with RedactText(err.Error(), raw) as its message. The result
// unwraps to err, so errors.Is and errors.As see through it. A nil err gives nil.
func RedactError(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := RedactText(err.Error(), raw)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError is an error whose text had secrets removed; it unwraps to the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// secretWords mark a URL parameter or connection-string keyword whose value is a secret
// (password, sslpassword, passwd, pwd, secret_key, token, credentials, creds, nkey, auth, ...).
var secretWords = []string{"pass", "pwd", "secret", "token", "credential", "creds", "key", "auth", "signature", "private"}

// SecretWords returns the words that mark a parameter or keyword as holding a secret: a name
// containing one of them (case-insensitively) has its value redacted from logs and errors.
func SecretWords() []string { return append([]string(nil), secretWords...) }

// SecretParam reports whether a URL query parameter's (or connection-string keyword's) name
// says its value is a secret; see SecretWords.
func SecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// userNameSchemes are the schemes whose user-info without a password is a user name, not a
// possible token.
var userNameSchemes = []string{"postgres", "postgresql"}

// maxRedactDepth bounds the recursion into parameter values that hold URLs.
const maxRedactDepth = 3

// dsnStartRE recognises a keyword/value connection string: it starts with keyword=.
var dsnStartRE = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// dsnSecretRE finds secret keywords of a keyword/value connection string, the keyword and "="
// in group 1 and the value (quoted, possibly unterminated, or not) in group 2.
var dsnSecretRE = regexp.MustCompile(`(?i)(\b[a-z0-9_]*(?:` + strings.Join(secretWords, "|") + `)[a-z0-9_]*\s*=\s*)('(?:[^'\\]|\\.)*(?:'|\\?$)|\S*)`)

// dsnAtRE finds an unquoted connection-string value holding an "@" (user=admin@server, or
// user-info written where a host was meant): the part before its last "@" is in group 2.
var dsnAtRE = regexp.MustCompile(`(=\s*)([^\s'@][^\s']*)@`)

// schemeRE is a URL scheme as RFC 3986 defines it.
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*$`)

// redactSecrets returns raw redacted (see Redact) and the secrets it holds.
func redactSecrets(raw string) (string, []string) {
	r := &redactor{}
	out := r.text(raw, 0)
	// Longest first, each once.
	slices.SortFunc(r.secrets, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return out, slices.Compact(r.secrets)
}

// redactor collects the secrets met while redacting one text.
type redactor struct {
	secrets []string
}

// secret records v, as written and decoded, as a secret.
func (r *redactor) secret(v string) {
	if v == "" || v == Redacted {
		return
	}
	r.secrets = append(r.secrets, v)
	if d, err := url.PathUnescape(v); err == nil && d != v && d != "" {
		r.secrets = append(r.secrets, d)
	}
	if d, err := url.QueryUnescape(v); err == nil && d != v && d != "" {
		r.secrets = append(r.secrets, d)
	}
}

func (r *redactor) text(raw string, depth int) string {
	if dsnStartRE.MatchString(raw) {
		return r.dsn(raw)
	}
	out := r.url(raw, depth)
	if strings.ContainsAny(raw, " \t\r\n") {
		// A URL cannot hold whitespace: this may be a URL with keyword/value settings after
		// it (postgres://h/db password=x).
		out = r.dsn(out)
	}
	return out
}

// url redacts text that is not a keyword/value connection string.
func (r *redactor) url(raw string, depth int) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !schemeRE.MatchString(scheme) {
		return r.opaque(raw, depth)
	}
	// Split as url.Parse does: fragment, then query, then the authority up to the first "/",
	// whose user-info ends at its last "@".
	body, frag, hasFrag := strings.Cut(rest, "#")
	body, query, hasQuery := strings.Cut(body, "?")
	authority, path := body, ""
	if i := strings.IndexByte(body, '/'); i >= 0 {
		authority, path = body[:i], body[i:]
	}
	_, perr := url.Parse(raw)
	if perr != nil && strings.Contains(rest, "@") || strings.Contains(path, "@") || strings.Contains(frag, "@") || strayAt(query) {
		// Unparseable, or an "@" after the authority that is not inside a URL-valued
		// parameter: a password or token with an unescaped "/", "?" or "#". Its structure
		// cannot be trusted.
		return scheme + "://" + r.opaque(rest, depth)
	}
	if perr != nil && strings.Contains(authority, ":") {
		// Unparseable without user-info: the authority may be the start of one, user:password
		// cut short by an unescaped character (it reads as a bad port).
		r.secret(authority)
		authority = Redacted
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		b.WriteString(r.userInfo(authority[:i], strings.ToLower(scheme)))
		b.WriteByte('@')
		authority = authority[i+1:]
	}
	b.WriteString(authority)
	b.WriteString(path)
	r.tail(&b, query, hasQuery, frag, hasFrag, depth)
	return b.String()
}

// opaque redacts text whose structure cannot be trusted: no scheme, or not a parseable URL.
// Everything before its last "@" is replaced; the query and fragment after it are redacted.
func (r *redactor) opaque(raw string, depth int) string {
	var b strings.Builder
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		// Which "@" ends the user-info is unknown: each of the first and last few may (a URL
		// parser would pick the last one before a "/", "?" or "#").
		ats := atIndexes(raw)
		if len(ats) > 8 {
			ats = append(ats[:4], ats[len(ats)-4:]...)
		}
		for _, at := range ats {
			r.looseUserInfo(raw[:at])
		}
		b.WriteString(Redacted)
		b.WriteByte('@')
		raw = raw[i+1:]
	}
	raw, frag, hasFrag := strings.Cut(raw, "#")
	raw, query, hasQuery := strings.Cut(raw, "?")
	b.WriteString(raw)
	r.tail(&b, query, hasQuery, frag, hasFrag, depth)
	return b.String()
}

// atIndexes returns the positions of every "@" in s.
func atIndexes(s string) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		if s[i] == '@' {
			out = append(out, i)
		}
	}
	return out
}

// looseUserInfo records the secrets of text that ends where a user-info would: the whole, and
// what follows its first ":" and its last "//" (a password after a user name or a scheme).
func (r *redactor) looseUserInfo(info string) {
	r.secret(info)
	if _, pw, ok := strings.Cut(info, ":"); ok {
		r.secret(pw)
	}
	if j := strings.LastIndex(info, "//"); j >= 0 {
		r.secret(info[j+2:])
		if _, pw, ok := strings.Cut(info[j+2:], ":"); ok {
			r.secret(pw)
		}
	}
}

// userInfo redacts a URL's user-info: user:password keeps the user, a lone user-info is
// replaced whole unless the scheme names a user there (see userNameSchemes).
func (r *redactor) userInfo(info, scheme string) string {
	if user, pw, ok := strings.Cut(info, ":"); ok {
		r.secret(pw)
		return user + ":" + Redacted
	}
	if slices.Contains(userNameSchemes, scheme) {
		return info
	}
	r.secret(info)
	return Redacted
}

// tail writes the redacted query and fragment.
func (r *redactor) tail(b *strings.Builder, query string, hasQuery bool, frag string, hasFrag bool, depth int) {
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(r.query(query, depth))
	}
	if hasFrag {
		b.WriteByte('#')
		if frag != "" {
			r.secret(frag)
			b.WriteString(Redacted)
		}
	}
}

// query redacts the values of secret parameters, and the secrets of URLs in other values.
func (r *redactor) query(q string, depth int) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			if strings.Contains(p, "@") { // not a parameter: the end of a password with an unescaped "?"
				r.secret(p)
				parts[i] = Redacted
			}
			continue
		}
		name := k
		if d, err := url.QueryUnescape(k); err == nil {
			name = d
		}
		if SecretParam(name) {
			r.secret(v)
			parts[i] = k + "=" + Redacted
			continue
		}
		if depth >= maxRedactDepth {
			if strings.Contains(v, "@") || strings.Contains(v, "%40") {
				r.secret(v)
				parts[i] = k + "=" + Redacted
			}
			continue
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			dv = v
		}
		if !strings.Contains(dv, "@") && !strings.Contains(dv, "#") {
			continue
		}
		// A value holding URLs with user-info (a server list, an endpoint): redact each.
		urls := splitURLs(dv)
		for j, u := range urls {
			urls[j] = r.text(u, depth+1)
		}
		if joined := strings.Join(urls, ","); joined != dv {
			parts[i] = k + "=" + url.QueryEscape(joined)
		}
	}
	return strings.Join(parts, "&")
}

// strayAt reports whether a query holds an "@" anywhere but in a parameter value that holds a
// URL (name=scheme://user@host).
func strayAt(query string) bool {
	for _, p := range strings.Split(query, "&") {
		if !strings.Contains(p, "@") && !strings.Contains(p, "%40") {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); ok && err == nil && SecretParam(dk) {
			continue // redacted whole anyway
		}
		if d, err := url.QueryUnescape(v); err == nil {
			v = d
		}
		if !ok || !strings.Contains(v, "://") {
			return true
		}
	}
	return false
}

// splitURLs splits a comma-separated list of URLs; a comma not followed by scheme:// is part
// of the URL before it (a password may hold commas).
func splitURLs(v string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && v[i] != ',' {
			continue
		}
		// v[start:i] is done when the next piece starts with scheme://.
		next := v[min(i+1, len(v)):]
		if j := strings.IndexByte(next, ','); j >= 0 {
			next = next[:j]
		}
		scheme, _, ok := strings.Cut(next, "://")
		if i == len(v) || ok && schemeRE.MatchString(scheme) {
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return out
}

// dsn redacts a keyword/value connection string.
func (r *redactor) dsn(raw string) string {
	out := dsnSecretRE.ReplaceAllStringFunc(raw, func(m string) string {
		sm := dsnSecretRE.FindStringSubmatch(m)
		v := sm[2]
		r.secret(v)
		if strings.HasPrefix(v, "'") {
			u := strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
			r.secret(u)
			r.secret(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(u))
		}
		return sm[1] + Redacted
	})
	return dsnAtRE.ReplaceAllStringFunc(out, func(m string) string {
		sm := dsnAtRE.FindStringSubmatch(m)
		r.looseUserInfo(sm[2])
		return sm[1] + Redacted + "@"
	})
}

// shortSecret is the length below which RedactText replaces a secret only where it stands
// alone (not inside a word), so that a one-letter password does not garble every word that
// holds its letter.
const shortSecret = 4

// wordBefore reports whether a word goes on before text[at]: a letter or digit that is not the
// end of a percent-encoded byte (%2F, %40: a delimiter when decoded).
func wordBefore(text string, at int) bool {
	if at >= 3 && text[at-3] == '%' && isHex(text[at-2]) && isHex(text[at-1]) {
		return false
	}
	return wordByte(text, at-1)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// wordByte reports whether text[i] exists and is a letter or digit.
func wordByte(text string, i int) bool {
	if i < 0 || i >= len(text) {
		return false
	}
	c := text[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
