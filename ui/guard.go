package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/txmq/txmq"
)

// HostCheck says whether the dashboard checks the Host header of each request (see
// Options.HostCheck).
type HostCheck int

const (
	// HostCheckAuto, the default: Handler checks the Host unless Options.User is set (basic
	// auth on); ForApp does not check it (the app's own auth and routing stand in front of the
	// dashboard).
	HostCheckAuto HostCheck = iota
	// HostCheckOn checks the Host of every request, with or without auth.
	HostCheckOn
	// HostCheckOff never checks the Host.
	HostCheckOff
)

// hostPort is one entry of Options.AllowedHosts: a lower-case name (an IP without brackets)
// and a port, "" for any port.
type hostPort struct{ name, port string }

// splitHost splits a Host header value or an AllowedHosts entry into its lower-case name
// (without an IPv6 literal's brackets) and its port ("" when it has none).
func splitHost(h string) (name, port string) {
	h = strings.ToLower(strings.TrimSpace(h))
	if n, p, err := net.SplitHostPort(h); err == nil {
		return n, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ""
}

// parseAllowedHosts checks and parses Options.AllowedHosts.
func parseAllowedHosts(hosts []string) ([]hostPort, error) {
	out := make([]hostPort, 0, len(hosts))
	for _, h := range hosts {
		name, port := splitHost(h)
		if name == "" || strings.ContainsAny(name, "/@?#") || strings.ContainsAny(port, "/@?#") {
			return nil, fmt.Errorf("%w: ui: Options.AllowedHosts entry %q: give a host name, optionally with its port (dashboard.example.com or dashboard.example.com:8443), without a scheme or path", txmq.ErrInvalidConfig, h)
		}
		out = append(out, hostPort{name, port})
	}
	return out, nil
}

// localAddr returns the address the request's connection was accepted on, nil when unknown.
func localAddr(r *http.Request) *net.TCPAddr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return a
}

// hostAllowed reports whether r's Host names this dashboard: an entry of AllowedHosts, or,
// on the port the connection came in on, a loopback name (localhost, a loopback IP such as
// 127.0.0.1 or [::1]) or the IP the connection came in on. A page of a foreign site made
// same-origin with the dashboard by DNS rebinding carries its own name and is refused.
func (s *server) hostAllowed(r *http.Request) bool {
	name, port := splitHost(r.Host)
	if name == "" {
		return false
	}
	if port == "" {
		port = "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	for _, a := range s.allowed {
		if a.name == name && (a.port == "" || a.port == port) {
			return true
		}
	}
	local := localAddr(r)
	if local != nil && port != strconv.Itoa(local.Port) {
		return false
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && (ip.IsLoopback() || (local != nil && ip.Equal(local.IP)))
}

// misdirected answers a request whose Host is not the dashboard's (421).
func misdirected(w http.ResponseWriter, r *http.Request) {
	where := "its own address"
	if local := localAddr(r); local != nil {
		where = "http://" + local.String() + "/"
	}
	http.Error(w, fmt.Sprintf("txmq ui: this dashboard does not answer to Host %q: open it at %s, or allow the name with txmq ui --allow-host (ui.Options.AllowedHosts)", r.Host, where),
		http.StatusMisdirectedRequest)
}

// fetchAllowed applies the browser's fetch metadata (Sec-Fetch-Site, -Mode, -Dest), where
// sent: a change (any method but GET and HEAD) must come from the dashboard's own pages
// (same-origin); a read from another site must be a top-level navigation (a link followed),
// not a subresource, a script's fetch or a frame. Requests without the headers (older
// browsers, curl) are left to the other checks.
func fetchAllowed(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "" {
		return true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return site == "same-origin"
	}
	if site != "cross-site" {
		return true
	}
	dest := r.Header.Get("Sec-Fetch-Dest")
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" && (dest == "document" || dest == "")
}

// guard wraps h: headers every page gets, then the Host check (421), the fetch metadata
// check (403) and basic auth when configured (401).
func (s *server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; form-action 'self'")
		w.Header().Set("Cache-Control", "no-store")
		if s.checkHost && !s.hostAllowed(r) {
			misdirected(w, r)
			return
		}
		if !fetchAllowed(r) {
			http.Error(w, "cross-site request refused: open the dashboard at its own address", http.StatusForbidden)
			return
		}
		if s.o.User != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.o.User)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(s.o.Password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="txmq"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

const csrfCookie = "txmq_csrf"

// sign returns the hex HMAC-SHA256 of parts under the dashboard's key, each part
// length-prefixed so that no two lists of parts sign alike.
func (s *server) sign(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// session returns the request's session nonce: the value of its CSRF cookie, "" when it has
// none (or one the dashboard did not make the shape of).
func session(r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 32 {
		return ""
	}
	if _, err := hex.DecodeString(c.Value); err != nil {
		return ""
	}
	return c.Value
}

// csrfToken is the token a form of this session carries: an HMAC of the session nonce (and
// of the basic-auth user, when auth is on), which only this dashboard can compute.
func (s *server) csrfToken(r *http.Request, nonce string) string {
	var user string
	if s.o.User != "" {
		user, _, _ = r.BasicAuth()
	}
	return s.sign("csrf", nonce, user)
}

// csrf returns the CSRF token of the request's session, starting a session (setting the
// cookie) when it has none.
func (s *server) csrf(w http.ResponseWriter, r *http.Request) string {
	nonce := session(r)
	if nonce == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		nonce = hex.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: nonce, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	return s.csrfToken(r, nonce)
}

// csrfValid reports whether the form's token is the one of the request's session.
func (s *server) csrfValid(r *http.Request) bool {
	nonce := session(r)
	return nonce != "" && hmac.Equal([]byte(s.csrfToken(r, nonce)), []byte(r.PostFormValue("csrf")))
}

// banner is the outcome of a change, shown on the page the change redirects to: one of the
// fixed messages of banners, with its arguments.
type banner struct {
	code string
	args []string
}

// banners are the only messages the dashboard shows in its banner: a format per code and its
// number of arguments. The arguments come from the change itself and travel in the redirect
// signed with the session, so that a link cannot make the dashboard say anything else.
var banners = map[string]struct {
	format string
	args   int
}{
	"paused":     {"paused %s: nodes start no new batch of it within a second or so", 1},
	"resumed":    {"resumed %s", 1},
	"replayed":   {"replayed dead letter %s with a fresh budget", 1},
	"purged":     {"purged %s dead letter(s) of %s", 2},
	"replayedq":  {"replayed %s dead letter(s) of %s with a fresh budget", 2},
	"cancelled":  {"cancelled message %s (queue %s, now %s)", 3},
	"rannow":     {"made %s %s message(s) of %s due now (%s skipped: claimed or gone meanwhile)", 4},
	"cancelledq": {"cancelled %s %s message(s) of %s (%s skipped: claimed, completed or gone meanwhile)", 4},
	"failed":     {"failed: %s", 1},
}

// text returns the banner's message.
func (b banner) text() string {
	f := banners[b.code]
	args := make([]any, len(b.args))
	for i, a := range b.args {
		args[i] = a
	}
	return fmt.Sprintf(f.format, args...)
}

// Query parameters of a banner in a redirect.
const (
	msgParam    = "msg"
	msgArgParam = "msgarg"
	msgSigParam = "msgsig"
)

// bannerSig signs b for the session nonce.
func (s *server) bannerSig(nonce string, b banner) string {
	return s.sign(append([]string{"banner", nonce, b.code}, b.args...)...)
}

// addBanner puts b, signed for r's session, in q.
func (s *server) addBanner(q url.Values, r *http.Request, b banner) {
	q.Set(msgParam, b.code)
	q[msgArgParam] = b.args
	q.Set(msgSigParam, s.bannerSig(session(r), b))
}

// bannerText returns the text of the banner in r's query, "" when there is none or when it
// is not one the dashboard made for this session.
func (s *server) bannerText(r *http.Request) string {
	q := r.URL.Query()
	b := banner{code: q.Get(msgParam), args: q[msgArgParam]}
	f, ok := banners[b.code]
	nonce := session(r)
	if !ok || len(b.args) != f.args || nonce == "" || !hmac.Equal([]byte(s.bannerSig(nonce, b)), []byte(q.Get(msgSigParam))) {
		return ""
	}
	return b.text()
}
