package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
)

func init() {
	register(&command{name: "msg", summary: "messages by id: show ID, ls (--queue, --state, --since, --until), cancel ID or --queue Q --state S, run-now --queue Q --state S", run: runMsg})
}

const msgUsage = `Usage: txmq msg show|ls|cancel|run-now [flags]

  show ID    print what is known of one message
  ls         list messages, newest first (--queue, --state, --since, --until, --limit, --json)
  cancel ID  cancel a message that has not completed (a running batch is not interrupted)
  cancel --queue Q --state S [--since T] [--until T] [--yes]
             cancel every message of Q in state S (queued, delayed or retry): asks for Q to
             be typed back on a terminal, needs --yes in a script
  run-now --queue Q --state delayed|retry [--since T] [--until T] [--yes]
             make every batch of Q holding messages in that state due now (whole batches,
             attempt counts kept; memory, SQL jobs, redis), confirmed as cancel is

Source: the ledger in the app database (--database-url, TXMQ_DATABASE_URL; the app runs with
Config.Ledger) when it has one; else the backend's own lookup (--backend, TXMQ_BACKEND) where the
adapter can answer (memory, SQL jobs, redis; cancel: the same); else an "unknown" error
naming the backend.`

func runMsg(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, msgUsage)
		connectionHelp(stderr)
		if len(args) == 0 {
			return &usageError{msg: "missing subcommand"}
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "cancel":
		if bulkArgs(args[1:]) {
			return msgBulk(ctx, cancelWhere, args[1:], stdout, stderr)
		}
		return msgOne(ctx, args[0], args[1:], stdout, stderr)
	case "show":
		return msgOne(ctx, args[0], args[1:], stdout, stderr)
	case "run-now":
		return msgBulk(ctx, runNow, args[1:], stdout, stderr)
	case "ls":
		return msgList(ctx, args[1:], stdout, stderr)
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q: use show, ls, cancel or run-now", args[0])}
}

// openInspector opens the ledger of the app database when it has one, else the backend.
func openInspector(ctx context.Context, f *dbFlags) (*txmq.Inspector, func(), error) {
	if *f.url == "" && *f.backend == "" {
		return nil, nil, &usageError{msg: "nothing to look in: set --database-url (TXMQ_DATABASE_URL) for the ledger, or --backend (TXMQ_BACKEND)"}
	}
	if err := f.resolveSchema(nil); err != nil {
		return nil, nil, err
	}
	if *f.url != "" {
		pool, err := connect(ctx, *f.url)
		if err != nil {
			return nil, nil, err
		}
		o := &ledger.Options{Schema: *f.schema, NoPrune: true}
		ok, err := ledger.Exists(ctx, pool, o)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		if ok {
			l, err := ledger.New(pool, o)
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return txmq.NewInspector(l, nil), func() { _ = l.Close(context.Background()); pool.Close() }, nil
		}
		pool.Close()
		if *f.backend == "" {
			return nil, nil, fmt.Errorf("%w: the app database has no ledger table in schema %q (the app runs without Config.Ledger, or txmq migrate was not run); set --backend to ask the backend itself", core.ErrLookupUnsupported, *f.schema)
		}
	}
	be, err := openBackend(ctx, backendSetting, *f.backend, false)
	if err != nil {
		return nil, nil, err
	}
	in := txmq.NewInspector(nil, be)
	return in, func() { _ = be.Close() }, nil
}

func msgOne(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("msg "+sub, "msg "+sub+" ID [--json]", stderr)
	f := addDBFlags(fs, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: fmt.Sprintf("msg %s takes one message id", sub)}
	}
	id := fs.Arg(0)
	in, done, err := openInspector(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	var m txmq.MessageInfo
	if sub == "cancel" {
		m, err = in.Cancel(ctx, id)
	} else {
		m, err = in.Get(ctx, id)
	}
	if err != nil && (m.ID == "" || !errors.Is(err, core.ErrNotCancellable)) {
		return err
	}
	if *asJSON {
		if perr := printJSON(stdout, m); perr != nil {
			return perr
		}
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("id", m.ID)
	row("queue", m.Queue)
	row("state", string(m.State))
	row("batch", m.BatchID)
	row("published", stamp(m.PublishedAt))
	row("since", stamp(m.UpdatedAt))
	switch m.State {
	case core.StateDelayed:
		row("due", stamp(m.Due))
	case core.StateRetry:
		row("next run", stamp(m.Due))
	}
	row("node", m.Node)
	if m.Priority > 0 {
		row("priority", fmt.Sprint(m.Priority))
	}
	if m.FairKey != "" {
		row("fair key", m.FairKey)
	}
	if m.Runs > 0 {
		row("runs", fmt.Sprint(m.Runs))
	}
	row("reason", m.Reason)
	row("last error", oneLine(m.Error, 200))
	if m.State == core.StateDead {
		row("replay", "txmq dlq ls --queue "+m.Queue+" (then txmq dlq replay ID)")
	}
	if ferr := tw.Flush(); ferr != nil {
		return ferr
	}
	return err
}

func msgList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("msg ls", "msg ls [--queue Q] [--state S] [--since T] [--until T] [--limit N] [--json]", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "only this queue")
	state := fs.String("state", "", "only this state: "+statesText())
	since := fs.String("since", "", "only messages published at or after T (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only messages published before T (RFC 3339, or a duration ago)")
	limit := fs.Int("limit", core.DefaultMessageLimit, "at most this many, newest first")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	filter := core.MessageFilter{Queue: *queue, State: core.MessageState(*state), Limit: *limit}
	if *state != "" && !validState(filter.State) {
		return &usageError{msg: fmt.Sprintf("--state %q: use one of %s", *state, statesText())}
	}
	if *limit <= 0 {
		return &usageError{msg: fmt.Sprintf("--limit %d: use a number > 0", *limit)}
	}
	var err error
	if filter.Since, err = parseWhen("--since", *since); err != nil {
		return err
	}
	if filter.Until, err = parseWhen("--until", *until); err != nil {
		return err
	}
	in, done, err := openInspector(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	ms, err := in.List(ctx, filter)
	if err != nil {
		return err
	}
	if len(ms) == 0 && *queue != "" {
		if err := msgQueueKnown(ctx, f, *queue); err != nil {
			return err
		}
	}
	if *asJSON {
		if ms == nil {
			ms = []txmq.MessageInfo{}
		}
		return printJSON(stdout, ms)
	}
	if len(ms) == 0 {
		fmt.Fprintln(stdout, "no messages")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tSTATE\tPUBLISHED\tSINCE\tRUNS\tNODE\tDETAIL")
	for _, m := range ms {
		detail := m.Reason
		if m.Error != "" {
			detail = strings.TrimSpace(detail + " " + oneLine(m.Error, 60))
		}
		if !m.Due.IsZero() {
			detail = strings.TrimSpace("due " + stamp(m.Due) + " " + detail)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.Queue, m.State, stamp(m.PublishedAt), stamp(m.UpdatedAt), m.Runs, dash(m.Node), dash(detail))
	}
	return tw.Flush()
}

// parseWhen reads a time flag: RFC 3339, or a duration meaning that long ago; "" is zero.
func parseWhen(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, &usageError{msg: fmt.Sprintf("%s %q: use an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (90m)", name, v)}
}

func validState(s core.MessageState) bool {
	for _, st := range core.MessageStates {
		if st == s {
			return true
		}
	}
	return false
}

func statesText() string {
	s := make([]string, len(core.MessageStates))
	for i, st := range core.MessageStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// msgQueueKnown refuses a --queue that no source knows, once the listing came back empty: the
// app database's tables (when it is set) and the backend.
func msgQueueKnown(ctx context.Context, f *dbFlags, queue string) error {
	if *f.url != "" {
		_, done, err := f.openStore(ctx)
		if err != nil {
			return err
		}
		defer done()
	} else {
		defer f.close()
	}
	return f.requireKnown(ctx, queue, "--queue", "")
}
