package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
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
	// Backend gives the queues' depths (ready, in flight, delayed); nil leaves them out.
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
	// declared queues); nil lists the queues found in the outbox, the dead letters and the
	// pause marks, and those of the backend's depths.
	Queues func() []string
	// ReadOnly hides and refuses every change (pause, resume, replay, purge, cancel).
	ReadOnly bool
	// User and Password, when User is set, require HTTP basic auth with these credentials.
	User, Password string
	// Timeout bounds the reads of one page. Default 5 s.
	Timeout time.Duration
	// Logger receives the changes made through the dashboard. Default slog.Default().
	Logger *slog.Logger
}

// ForApp returns the dashboard of app (its store, backend and declared queues), with opts for the
// rest (nil: defaults). The app needs a database.
func ForApp(app *txmq.App, opts *Options) (http.Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
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
	o    Options
	tmpl *template.Template
}

// Handler returns the dashboard.
func Handler(opts *Options) (http.Handler, error) {
	if opts == nil || opts.Store == nil {
		return nil, fmt.Errorf("%w: ui: Options.Store is required (the app database: txmq.Open with TXMQ_DATABASE_URL)", txmq.ErrInvalidConfig)
	}
	s := &server{o: *opts}
	if s.o.Timeout <= 0 {
		s.o.Timeout = 5 * time.Second
	}
	if s.o.Logger == nil {
		s.o.Logger = slog.Default()
	}
	if s.o.Inspector == nil {
		if s.o.Node != nil {
			s.o.Inspector = s.o.Node.Inspector()
		} else {
			s.o.Inspector = txmq.NewInspector(nil, s.o.Backend)
		}
	}
	var err error
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
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		b, _ := files.ReadFile("templates/style.css")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /queues/{queue}/pause", s.change(s.pause))
	mux.HandleFunc("POST /queues/{queue}/resume", s.change(s.resume))
	mux.HandleFunc("POST /dead/{id}/replay", s.change(s.replay))
	mux.HandleFunc("POST /dead/purge", s.change(s.purge))
	mux.HandleFunc("POST /messages/cancel", s.change(s.cancelMessage))
	return s.auth(mux), nil
}

// auth wraps h with basic auth when configured, and sets headers every page gets.
func (s *server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; form-action 'self'")
		w.Header().Set("Cache-Control", "no-store")
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

// root returns the relative path from path to the dashboard's root ("./", "../", ...), so that
// links work wherever the dashboard is mounted.
func root(path string) string {
	if n := strings.Count(path, "/") - 1; n > 0 {
		return strings.Repeat("../", n)
	}
	return "./"
}

// csrf returns the request's CSRF token, setting the cookie when it has none.
func csrf(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return c.Value
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return tok
}

// change wraps a mutating action: refused in read-only mode, checked for CSRF and origin, then
// redirected (303) to the page named by the form's "back" field with the action's message.
func (s *server) change(fn func(ctx context.Context, r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		c, err := r.Cookie(csrfCookie)
		if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("csrf"))) != 1 {
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
		msg, err := fn(ctx, r)
		if err != nil {
			msg = "failed: " + err.Error()
		} else {
			s.o.Logger.Info("txmq ui: "+msg, "remote", r.RemoteAddr)
		}
		// back is a path relative to the dashboard's root, so that the redirect works wherever
		// the dashboard is mounted: the Location is relative to this request's own URL.
		back := r.PostFormValue("back")
		u, err := url.Parse(back)
		if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(back, "/") || strings.Contains(u.Path, "..") {
			u = &url.URL{}
		}
		q := u.Query()
		q.Set("msg", msg)
		u.RawQuery = q.Encode()
		w.Header().Set("Location", root(r.URL.Path)+u.String())
		w.WriteHeader(http.StatusSeeOther)
	}
}

func (s *server) render(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	data["CSRF"] = csrf(w, r)
	data["ReadOnly"] = s.o.ReadOnly
	data["Msg"] = r.URL.Query().Get("msg")
	data["Root"] = root(r.URL.Path)
	back := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	q.Del("msg")
	if e := q.Encode(); e != "" {
		back += "?" + e
	}
	data["Back"] = back
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, name, data); err != nil {
		s.o.Logger.Error("txmq ui: rendering a page failed", "page", name, "error", err)
	}
}

// queueRow is one line of the queues page.
type queueRow struct {
	Name         string
	Depth        *core.Depth // nil: not known (no backend, or it failed)
	Dead, Outbox int64
	OutboxAge    string
	Paused       bool
	PausedBy     string
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
	paused, err := s.o.Store.PausedQueues(ctx)
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
	list := make([]string, 0, len(names))
	for q := range names {
		list = append(list, q)
	}
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
		row := queueRow{Name: q, Dead: dead[q], Outbox: backlog[q].Rows}
		if b := backlog[q]; b.Rows > 0 {
			row.OutboxAge = b.OldestAge.Round(time.Second).String()
		}
		if d, ok := depths[q]; ok {
			row.Depth = &d
		}
		if p, ok := paused[q]; ok {
			row.Paused, row.PausedBy = true, p.PausedBy
		}
		rows = append(rows, row)
	}
	s.render(w, r, "queues.html", map[string]any{"Title": "Queues", "Rows": rows, "Errors": errs, "HasBackend": s.o.Backend != nil})
}

func (s *server) pause(ctx context.Context, r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if err := txmq.ValidateQueueName(q); err != nil {
		return "", err
	}
	if err := s.o.Store.Pause(ctx, q, "dashboard "+r.RemoteAddr); err != nil {
		return "", err
	}
	return "paused " + q + ": nodes start no new batch of it within a second or so", nil
}

func (s *server) resume(ctx context.Context, r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if err := txmq.ValidateQueueName(q); err != nil {
		return "", err
	}
	if err := s.o.Store.Resume(ctx, q); err != nil {
		return "", err
	}
	return "resumed " + q, nil
}
