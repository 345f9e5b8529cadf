package ui

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

//go:embed templates/*.html templates/style.css
var files embed.FS

// Options configures the dashboard; Store is required.
type Options struct {
	// Store is the app database's outbox and dead-letter store: the outbox backlog, dead
	// letters (list, show, replay, purge) and pause marks. Required.
	Store *outbox.Store
	// Backend gives the queues' depths (ready, in flight, delayed) and, where it lists its
	// queues (core.QueueLister), the busy queues no table names; nil leaves them out.
	Backend txmq.Backend
	// Node, when the dashboard runs inside the app (ForApp sets it), adds each queue's declared
	// settings and a chart of the runs per minute of the last hour on this node.
	Node *txmq.Node
	// Inspector looks messages up for the Messages page (by id, by queue, state and time) and
	// cancels them, as `txmq msg` does. Default: Node's (Node.Inspector) when Node is set, else
	// Backend's native lookup; when neither can look up, the page shows the Inspector's error
	// (txmq.ErrLookupUnsupported). ForApp sets the app's (App.Inspector, the ledger when on).
	Inspector *txmq.Inspector
	// Queues returns queue names to list even when nothing of them is found (e.g. the app's
	// declared queues). The page lists them, the queues found in the outbox, the dead letters
	// and the pause marks, and the queues the backend lists (core.QueueLister) that hold
	// ready, in-flight or delayed batches.
	Queues func() []string
	// ReadOnly hides and refuses every change (pause, resume, replay, purge, cancel). The
	// pages still show the messages' payloads (unless HidePayloads) and errors: it is no
	// substitute for auth.
	ReadOnly bool
	// HidePayloads leaves every message payload out of the pages: the Messages page's and
	// the dead letters' bodies. Ids, states and errors are still shown. Default false.
	HidePayloads bool
	// FormatPayload renders a message's payload (one JSON value as published) for the pages;
	// its result is shown as escaped, preformatted text, e.g. with personal fields masked.
	// Default: indented JSON (the raw bytes when they are not JSON).
	FormatPayload func(queue string, payload []byte) string
	// User and Password, when User is set, require HTTP basic auth with these credentials.
	User, Password string
	// HostCheck decides whether the dashboard checks each request's Host header, answering
	// 421 Misdirected Request (on every route, reads included) unless it names the dashboard:
	// the IP the connection came in on or a loopback name (localhost, 127.0.0.1, [::1]), with
	// the port the connection came in on, or an entry of AllowedHosts. Without auth, this is
	// what stops a foreign page made same-origin with the dashboard by DNS rebinding (its Host
	// is the foreign name). Default HostCheckAuto: Handler checks unless User is set; ForApp
	// does not (see ForApp).
	HostCheck HostCheck
	// AllowedHosts are further Host values the dashboard answers when it checks the Host, e.g.
	// the name a reverse proxy in front of it passes on: "name:port" allows that name on that
	// port, a bare "name" on any port. Default none: only the addresses above.
	AllowedHosts []string
	// SigningKey signs the CSRF tokens of the forms (an HMAC of the session cookie, and of the
	// basic-auth user when auth is on) and the banners a change leaves on the page it
	// redirects to. At least 32 bytes. Default: a random key made by Handler, so that a page
	// loaded before a restart must be reloaded before its forms work; give every process the
	// same key when a load balancer spreads one operator's requests over several.
	SigningKey []byte
	// Timeout bounds the reads of one page. Default 5 s.
	Timeout time.Duration
	// Logger receives the changes made through the dashboard. Default slog.Default().
	Logger *slog.Logger
}

// ForApp returns the dashboard of app (its store, backend and declared queues), with opts for the
// rest (nil: defaults). The app needs a database.
//
// ForApp's dashboard is meant to be mounted behind the app's own authentication, on whatever
// names the app is served under: with HostCheckAuto (the default) it does not check the Host
// header, which the app's auth and routing stand for. An app that serves it without auth
// (e.g. on a loopback admin port) sets HostCheck: HostCheckOn, with AllowedHosts for any name
// it is reached by besides the listening address and the loopback names. The CSRF, origin
// and fetch metadata checks apply either way.
func ForApp(app *txmq.App, opts *Options) (http.Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.HostCheck == HostCheckAuto {
		o.HostCheck = HostCheckOff
	}
	o.Store, o.Backend, o.Node = app.Store, app.Backend, app.Node
	if o.Inspector == nil {
		o.Inspector = app.Inspector()
	}
	if o.Queues == nil {
		o.Queues = app.Node.Registry().Names
	}
	return Handler(&o)
}

type server struct {
	o         Options
	tmpl      *template.Template
	checkHost bool       // answer 421 to a Host that does not name the dashboard
	allowed   []hostPort // Options.AllowedHosts, parsed
	key       []byte     // signs the CSRF tokens and the banners
}

// Handler returns the dashboard.
func Handler(opts *Options) (http.Handler, error) {
	if opts == nil || opts.Store == nil {
		return nil, fmt.Errorf("%w: ui: Options.Store is required (the app database: txmq.Open with TXMQ_DATABASE_URL)", txmq.ErrInvalidConfig)
	}
	s := &server{o: *opts}
	var err error
	if s.allowed, err = parseAllowedHosts(s.o.AllowedHosts); err != nil {
		return nil, err
	}
	switch s.o.HostCheck {
	case HostCheckAuto:
		s.checkHost = s.o.User == ""
	case HostCheckOn:
		s.checkHost = true
	case HostCheckOff:
	default:
		return nil, fmt.Errorf("%w: ui: Options.HostCheck %d: use HostCheckAuto, HostCheckOn or HostCheckOff", txmq.ErrInvalidConfig, s.o.HostCheck)
	}
	switch n := len(s.o.SigningKey); {
	case n == 0:
		s.key = make([]byte, 32)
		if _, err := rand.Read(s.key); err != nil {
			return nil, fmt.Errorf("ui: making the signing key: %w", err)
		}
	case n < 32:
		return nil, fmt.Errorf("%w: ui: Options.SigningKey is %d bytes: give at least 32 random bytes, or none for a random key per Handler", txmq.ErrInvalidConfig, n)
	default:
		s.key = bytes.Clone(s.o.SigningKey)
	}
	if s.o.Timeout <= 0 {
		s.o.Timeout = 5 * time.Second
	}
	if s.o.Logger == nil {
		s.o.Logger = slog.Default()
	}
	if s.o.FormatPayload == nil {
		s.o.FormatPayload = prettyJSON
	}
	if s.o.Inspector == nil {
		if s.o.Node != nil {
			s.o.Inspector = s.o.Node.Inspector()
		} else {
			s.o.Inspector = txmq.NewInspector(nil, s.o.Backend)
		}
	}
	s.tmpl, err = template.New("").Funcs(template.FuncMap{
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		},
		"stamp": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
	}).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.queues)
	mux.HandleFunc("GET /queues/{queue}", s.queue)
	mux.HandleFunc("GET /dead", s.deadList)
	mux.HandleFunc("GET /dead/{id}", s.deadShow)
	mux.HandleFunc("GET /messages", s.messages)
	mux.HandleFunc("GET /schedules", s.schedules)
	mux.HandleFunc("GET /nodes", s.nodes)
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		b, _ := files.ReadFile("templates/style.css")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /queues/{queue}/pause", s.change(s.pause))
	mux.HandleFunc("POST /queues/{queue}/resume", s.change(s.resume))
	mux.HandleFunc("POST /dead/{id}/replay", s.change(s.replay))
	mux.HandleFunc("POST /dead/purge", s.change(s.purge))
	mux.HandleFunc("POST /dead/replay", s.change(s.replayQueue))
	mux.HandleFunc("POST /messages/cancel", s.change(s.cancelMessage))
	mux.HandleFunc("POST /messages/cancel-where", s.change(s.cancelWhere))
	mux.HandleFunc("POST /messages/run-now", s.change(s.runNow))
	return s.guard(mux), nil
}

// root returns the relative path from path to the dashboard's root ("./", "../", ...), so that
// links work wherever the dashboard is mounted.
func root(path string) string {
	if n := strings.Count(path, "/") - 1; n > 0 {
		return strings.Repeat("../", n)
	}
	return "./"
}

// change wraps a mutating action: refused in read-only mode, checked for CSRF and origin, then
// redirected (303) to the page named by the form's "back" field with the action's banner.
func (s *server) change(fn func(ctx context.Context, r *http.Request) (banner, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		if !s.csrfValid(r) {
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
		defer cancel()
		b, err := fn(ctx, r)
		if err != nil {
			b = banner{code: "failed", args: []string{err.Error()}}
		} else {
			s.o.Logger.Info("txmq ui: "+b.text(), "remote", r.RemoteAddr)
		}
		// back is a path relative to the dashboard's root, so that the redirect works wherever
		// the dashboard is mounted: the Location is relative to this request's own URL.
		back := r.PostFormValue("back")
		u, err := url.Parse(back)
		if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(back, "/") || strings.Contains(u.Path, "..") {
			u = &url.URL{}
		}
		q := u.Query()
		s.addBanner(q, r, b)
		u.RawQuery = q.Encode()
		w.Header().Set("Location", root(r.URL.Path)+u.String())
		w.WriteHeader(http.StatusSeeOther)
	}
}

func (s *server) render(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	data["CSRF"] = s.csrf(w, r)
	data["ReadOnly"] = s.o.ReadOnly
	data["Msg"] = s.bannerText(r)
	data["Root"] = root(r.URL.Path)
	path := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	q.Del(msgParam)
	q.Del(msgArgParam)
	q.Del(msgSigParam)
	data["Back"] = withQuery(path, q)
	// Auto-refresh, opt-in per page view (?refresh=N seconds): a meta refresh, no JavaScript,
	// to the page without its banner. Links turn it on (every refreshOn s) and off.
	if n, err := strconv.Atoi(q.Get("refresh")); err == nil && n >= minRefresh && n <= maxRefresh {
		data["Refresh"] = n
	}
	on, off := maps.Clone(q), maps.Clone(q)
	on.Set("refresh", strconv.Itoa(refreshOn))
	off.Del("refresh")
	data["RefreshOn"], data["RefreshOff"] = withQuery(path, on), withQuery(path, off)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, name, data); err != nil {
		s.o.Logger.Error("txmq ui: rendering a page failed", "page", name, "error", err)
	}
}

// The auto-refresh periods: the shortest and longest ?refresh= accepted (others are
// ignored), and the one the "auto-refresh" link sets, in seconds.
const (
	minRefresh = 2
	maxRefresh = 3600
	refreshOn  = 5
)

// withQuery returns path with q as its query, if any.
func withQuery(path string, q url.Values) string {
	if e := q.Encode(); e != "" {
		return path + "?" + e
	}
	return path
}

// queueRow is one line of the queues page.
type queueRow struct {
	Name         string
	Depth        *core.Depth // nil: not known (no backend, or it failed)
	Dead, Outbox int64
	OutboxAge    string
	Paused       bool
	PausedBy     string
	// OldestReady is how long the oldest ready batch has waited ("" when none is ready).
	OldestReady string
	// Runs and Failed count the batches run and failed over the last hour across the nodes
	// (their heartbeats); HasRuns is false when no node ran the queue in that hour.
	Runs, Failed int64
	HasRuns      bool
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	var errs []string
	names := map[string]bool{}
	if s.o.Queues != nil {
		for _, q := range s.o.Queues() {
			names[q] = true
		}
	}
	backlog, err := s.o.Store.Backlog(ctx)
	if err != nil {
		errs = append(errs, "outbox: "+err.Error())
	}
	dead, err := s.o.Store.DeadLetterCounts(ctx)
	if err != nil {
		errs = append(errs, "dead letters: "+err.Error())
	}
	paused, err := s.o.Store.Pauses().PausedQueues(ctx)
	if err != nil {
		errs = append(errs, "paused queues: "+err.Error())
	}
	for q := range backlog {
		names[q] = true
	}
	for q := range dead {
		names[q] = true
	}
	for q := range paused {
		names[q] = true
	}
	// The queues the nodes listen to, from their heartbeats of the last hour.
	runs, err := s.loadRuns(ctx)
	if err != nil {
		errs = append(errs, "heartbeats: "+err.Error())
	}
	for _, b := range runs.beats {
		for _, q := range b.Queues {
			names[q.Queue] = true
		}
	}
	// The backend's own listing adds the queues no table names, shown when busy (ready, in
	// flight or delayed batches): core.QueueLister, where the adapter has it.
	listed, note := s.backendQueues(ctx, names)
	list := make([]string, 0, len(names)+len(listed))
	for q := range names {
		list = append(list, q)
	}
	list = append(list, listed...)
	sort.Strings(list)
	var depths map[string]core.Depth
	if s.o.Backend != nil && len(list) > 0 {
		var err error
		if depths, err = s.o.Backend.Depths(ctx, list); err != nil {
			errs = append(errs, "backend: "+err.Error())
		}
	}
	rows := make([]queueRow, 0, len(list))
	for _, q := range list {
		if d := depths[q]; !names[q] && d.Ready+d.InFlight+d.Delayed == 0 {
			continue // listed by the backend only, and idle
		}
		row := queueRow{Name: q, Dead: dead[q], Outbox: backlog[q].Rows}
		if b := backlog[q]; b.Rows > 0 {
			row.OutboxAge = b.OldestAge.Round(time.Second).String()
		}
		if d, ok := depths[q]; ok {
			row.Depth = &d
			if d.Ready > 0 && !d.OldestReady.IsZero() {
				row.OldestReady = time.Since(d.OldestReady).Round(time.Second).String()
			}
		}
		if h, _ := runs.history(q); h != nil {
			row.Runs, _, row.Failed = totals(h)
			row.HasRuns = true
		}
		if p, ok := paused[q]; ok {
			row.Paused, row.PausedBy = true, p.PausedBy
		}
		rows = append(rows, row)
	}
	s.render(w, r, "queues.html", map[string]any{"Title": "Queues", "Rows": rows, "Errors": errs, "HasBackend": s.o.Backend != nil, "ListNote": note})
}

// backendQueues returns the queues the backend lists that are not in known, and, when it
// cannot list them, a note saying which queues the page may miss.
func (s *server) backendQueues(ctx context.Context, known map[string]bool) ([]string, string) {
	if s.o.Backend == nil {
		return nil, ""
	}
	qs, err := core.ListQueues(ctx, s.o.Backend)
	switch {
	case errors.Is(err, core.ErrListUnsupported):
		return nil, "this backend cannot list its queues: a queue with only ready, in-flight or delayed batches shows once a table names it"
	case err != nil:
		return nil, "the backend could not list its queues: " + err.Error()
	}
	var out []string
	for _, q := range qs {
		if !known[q] {
			out = append(out, q)
		}
	}
	return out, ""
}

func (s *server) pause(ctx context.Context, r *http.Request) (banner, error) {
	q := r.PathValue("queue")
	if err := txmq.ValidateQueueName(q); err != nil {
		return banner{}, err
	}
	if err := s.o.Store.Pauses().Pause(ctx, q, "dashboard "+r.RemoteAddr); err != nil {
		return banner{}, err
	}
	return banner{"paused", []string{q}}, nil
}

func (s *server) resume(ctx context.Context, r *http.Request) (banner, error) {
	q := r.PathValue("queue")
	if err := txmq.ValidateQueueName(q); err != nil {
		return banner{}, err
	}
	if err := s.o.Store.Pauses().Resume(ctx, q); err != nil {
		return banner{}, err
	}
	return banner{"resumed", []string{q}}, nil
}
