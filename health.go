package txmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// HealthOptions tunes the health checks; nil means every default.
type HealthOptions struct {
	// Timeout bounds each check that calls a server (the backend, the app database). Default 2 s.
	Timeout time.Duration
	// DriverStall: a started node whose polling driver has not begun an iteration for this long
	// is stuck. Default max(3 x PollWait, 30 s): one iteration waits at most about PollWait.
	DriverStall time.Duration
	// MaxBuffered: more messages than this waiting in the node's publish buffer is unhealthy (the
	// backend does not keep up, and memory grows). Default 100,000; negative turns the check off.
	MaxBuffered int64
	// MaxOutbox: more outbox rows (batches not published yet) than this is unhealthy. Default
	// 100,000; negative turns the check off. App only.
	MaxOutbox int64
}

func (o *HealthOptions) withDefaults(pollWait time.Duration) HealthOptions {
	var h HealthOptions
	if o != nil {
		h = *o
	}
	if h.Timeout <= 0 {
		h.Timeout = 2 * time.Second
	}
	if h.DriverStall <= 0 {
		h.DriverStall = max(3*pollWait, 30*time.Second)
	}
	if h.MaxBuffered == 0 {
		h.MaxBuffered = 100_000
	}
	if h.MaxOutbox == 0 {
		h.MaxOutbox = 100_000
	}
	return h
}

// HealthCheck is the outcome of one check.
type HealthCheck struct {
	// Name is the check: driver, backend, buffer, database or outbox.
	Name string `json:"name"`
	// OK is true when the check passed.
	OK bool `json:"ok"`
	// Detail says what was seen, and on failure what is wrong.
	Detail string `json:"detail"`
}

// Health is a health report: OK when every check passed.
type Health struct {
	// OK is true when every check passed.
	OK bool `json:"ok"`
	// Checks are the checks run, in order.
	Checks []HealthCheck `json:"checks"`
}

func (h *Health) add(name string, err error, detail string) {
	c := HealthCheck{Name: name, OK: err == nil, Detail: detail}
	if err != nil {
		c.Detail = err.Error()
	}
	h.Checks = append(h.Checks, c)
	h.OK = h.OK && c.OK
}

// Live reports whether the node's polling driver makes progress: for a liveness probe. It
// calls no server. A node not started yet, or closed, is live (nothing is stuck); a started
// node whose driver has not begun an iteration for HealthOptions.DriverStall is not (a hung
// backend call past every timeout, a deadlock): restarting the process is the remedy.
func (n *Node) Live(opts *HealthOptions) Health {
	o := opts.withDefaults(n.eng.PollWait())
	h := Health{OK: true}
	h.add("driver", n.checkDriver(o), n.driverDetail())
	return h
}

// Ready reports whether the node can do its work: for a readiness probe. Checks: the driver
// (as Live), the backend (answers a depth query within HealthOptions.Timeout) and the publish
// buffer (at most HealthOptions.MaxBuffered messages waiting).
func (n *Node) Ready(ctx context.Context, opts *HealthOptions) Health {
	o := opts.withDefaults(n.eng.PollWait())
	h := Health{OK: true}
	h.add("driver", n.checkDriver(o), n.driverDetail())
	detail, err := n.checkBackend(ctx, o)
	h.add("backend", err, detail)
	buffered := n.Stats().Buffered
	var berr error
	if o.MaxBuffered >= 0 && buffered > o.MaxBuffered {
		berr = fmt.Errorf("%d messages wait in the publish buffer (more than HealthOptions.MaxBuffered %d): the backend does not keep up", buffered, o.MaxBuffered)
	}
	h.add("buffer", berr, fmt.Sprintf("%d messages buffered", buffered))
	return h
}

func (n *Node) checkDriver(o HealthOptions) error {
	last, stopped := n.eng.DriverTurn()
	if last.IsZero() || stopped {
		return nil
	}
	if since := time.Since(last); since > o.DriverStall {
		return fmt.Errorf("the polling driver has not turned for %v (more than HealthOptions.DriverStall %v): it is stuck", since.Round(time.Millisecond), o.DriverStall)
	}
	return nil
}

func (n *Node) driverDetail() string {
	last, stopped := n.eng.DriverTurn()
	switch {
	case last.IsZero():
		return "not started"
	case stopped:
		return "stopped"
	}
	return fmt.Sprintf("last turn %v ago", time.Since(last).Round(time.Millisecond))
}

// checkBackend asks the backend for the depth of one declared queue (the registry's first).
func (n *Node) checkBackend(ctx context.Context, o HealthOptions) (string, error) {
	names := n.reg.Names()
	if len(names) == 0 {
		return "not checked: no queue declared", nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	if _, err := n.eng.Backend().Depths(ctx, names[:1]); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("the backend did not answer within HealthOptions.Timeout %v: %w", o.Timeout, err)
		}
		return "", err
	}
	return fmt.Sprintf("answered in %v", time.Since(start).Round(time.Microsecond)), nil
}

// Live is the node's Live.
func (a *App) Live(opts *HealthOptions) Health { return a.Node.Live(opts) }

// Ready is the node's Ready, and with an app database: the database (answers a ping within
// HealthOptions.Timeout) and the outbox (at most HealthOptions.MaxOutbox rows waiting).
func (a *App) Ready(ctx context.Context, opts *HealthOptions) Health {
	h := a.Node.Ready(ctx, opts)
	if a.Pool == nil {
		return h
	}
	o := opts.withDefaults(a.Node.eng.PollWait())
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	if err := a.Pool.Ping(ctx); err != nil {
		h.add("database", fmt.Errorf("the app database does not answer: %w", err), "")
		return h
	}
	h.add("database", nil, fmt.Sprintf("answered in %v", time.Since(start).Round(time.Microsecond)))
	if o.MaxOutbox < 0 {
		return h
	}
	backlog, err := a.Store.Backlog(ctx)
	if err != nil {
		h.add("outbox", fmt.Errorf("reading the outbox backlog: %w", err), "")
		return h
	}
	var rows int64
	for _, b := range backlog {
		rows += b.Rows
	}
	var oerr error
	if rows > o.MaxOutbox {
		oerr = fmt.Errorf("%d outbox rows wait (more than HealthOptions.MaxOutbox %d): the backend does not take them", rows, o.MaxOutbox)
	}
	h.add("outbox", oerr, fmt.Sprintf("%d rows waiting", rows))
	return h
}

// HealthHandler serves the app's probes: GET /livez (Live) and GET /readyz (Ready), answering
// 200 when healthy and 503 when not, with the report as JSON. Mount it under a prefix with
// http.StripPrefix. It shows no secrets: errors name settings, not URLs with passwords.
func (a *App) HealthHandler(opts *HealthOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { writeHealth(w, a.Live(opts)) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { writeHealth(w, a.Ready(r.Context(), opts)) })
	return mux
}

func writeHealth(w http.ResponseWriter, h Health) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !h.OK {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(h)
}
