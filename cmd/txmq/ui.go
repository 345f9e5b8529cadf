package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ui"
)

func init() {
	register(&command{name: "ui", summary: "web dashboard: queues, dead letters, pause/resume (--listen 127.0.0.1:8080)", run: runUI})
}

const uiSynopsis = `ui [--listen ADDR] [--read-only] [--hide-payloads] [--user U] [--allow-host NAME ...] (password from TXMQ_UI_PASSWORD)

Serves the web dashboard. Without --user there is no auth: anyone who can reach the address
sees the queues, the dead letters and the messages with their payloads (unless --hide-payloads),
and (unless --read-only) can pause, resume, replay, purge and cancel. So the default address
is loopback, and without --user the dashboard answers only to the --listen address and the
loopback names (another Host, as a DNS-rebinding page sends, gets 421); a change must come
from its own page (a CSRF token signed by this process, same origin).`

func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ui", uiSynopsis, stderr)
	f := addDBFlags(fs, true)
	f.publishes = true // the dashboard replays dead letters
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on; anything but loopback needs --user (and TXMQ_UI_PASSWORD) or --read-only")
	readOnly := fs.Bool("read-only", false, "show only: no pause, resume, replay, purge or cancel. The pages still show message payloads (unless --hide-payloads) and errors, to anyone who reaches the address when --user is not set")
	hidePayloads := fs.Bool("hide-payloads", false, "leave every message payload (the Messages page's and the dead letters' bodies) out of the pages; ids, states and errors are still shown")
	user := fs.String("user", "", "require HTTP basic auth with this user and the password in TXMQ_UI_PASSWORD")
	var allowHosts stringList
	fs.Var(&allowHosts, "allow-host", "a further Host the dashboard answers to without --user, NAME or NAME:PORT (repeatable, or comma-separated), e.g. a reverse proxy's name; by default only the --listen address and localhost, 127.0.0.1, [::1] on its port do (421 Misdirected Request otherwise)")
	if err := parse(fs, args); err != nil {
		return err
	}
	password := os.Getenv("TXMQ_UI_PASSWORD")
	if *user != "" && password == "" {
		return &usageError{msg: "--user needs the password in TXMQ_UI_PASSWORD (never on the command line)"}
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("--listen %q: %v; write host:port, e.g. 127.0.0.1:8080", *listen, err)}
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && *user == "" && !*readOnly {
		return &usageError{msg: fmt.Sprintf("--listen %s is not loopback: give --user (with TXMQ_UI_PASSWORD) or --read-only, so that no one else on the network can change queues", *listen)}
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	// The store's backend (replays publish there), closed by done; nil without --backend.
	backend, err := f.openedBackend(ctx)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	// The Messages page reads the ledger when the app database has one, else the backend's
	// native lookup, as `txmq msg` does; when neither can, the page shows why.
	in, doneIn, err := openInspector(ctx, f)
	if err != nil {
		logger.Warn("txmq ui: the Messages page cannot look messages up", "error", err)
		in = nil
	} else {
		defer doneIn()
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	defer ln.Close()
	// The --listen name is one the dashboard answers to (the IP the connection came in on and
	// the loopback names are anyway), with the port actually listened on (--listen HOST:0).
	if host != "" && net.ParseIP(host) == nil {
		allowHosts = append(allowHosts, net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	}
	h, err := ui.Handler(&ui.Options{Store: store, Backend: backend, Inspector: in, ReadOnly: *readOnly, HidePayloads: *hidePayloads, User: *user, Password: password,
		AllowedHosts: allowHosts, Logger: logger})
	if err != nil {
		if errors.Is(err, core.ErrInvalidConfig) {
			return &usageError{msg: strings.TrimPrefix(err.Error(), core.ErrInvalidConfig.Error()+": ")}
		}
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "txmq ui: serving http://%s/ (Ctrl-C to stop)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
