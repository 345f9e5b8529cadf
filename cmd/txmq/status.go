package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/schemaset"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register(&command{name: "status", summary: "per queue: ready, in flight, delayed, dead letters, outbox backlog", run: runStatus})
}

// stringList is a repeatable flag that also splits on commas.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// queueStatus is one row of txmq status. Nil fields were not measured (no backend, or no
// database).
type queueStatus struct {
	Queue         string   `json:"queue"`
	Ready         *int64   `json:"ready"`
	InFlight      *int64   `json:"in_flight"`
	Delayed       *int64   `json:"delayed"`
	DeadLetters   *int64   `json:"dead_letters"`
	OutboxRows    *int64   `json:"outbox_rows"`
	OutboxFailing *int64   `json:"outbox_failing"`
	OldestAgeSec  *float64 `json:"outbox_oldest_age_seconds"`
	// Old holds the depths of the old backends being drained (--drain), in the order given.
	Old []oldDepth `json:"old_backends,omitempty"`
}

const statusSynopsis = `status [--backend URL] [--drain URL ...] [--database-url URL] [--schema S] [--queue Q ...] [--json]

Prints one row per queue: ready, in flight and delayed batches (from the backend), dead letters
not replayed, and outbox rows waiting to be published with the oldest one's age (from the app
database). The queues are those found in the outbox and dead-letter tables plus every --queue:
a backend can only be asked about queues it is given by name, so name the queues to see with
--queue when there is no database (or when they have no outbox rows or dead letters). Works with
only a backend, only a database, or both. During a backend swap, --drain (default
$TXMQ_DRAIN_BACKENDS) adds each old backend's depths and whether it is empty: nodes with the
drain setting stop polling an empty old backend but re-check it, so remove it from
TXMQ_DRAIN_BACKENDS once no node runs the old setting and it shows empty here.`

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", statusSynopsis, stderr)
	f := addDBFlags(fs, false)
	backendURL := fs.String("backend", os.Getenv("TXMQ_BACKEND"), "backend URL to ask for depths (default $TXMQ_BACKEND)")
	var drains stringList
	_ = drains.Set(os.Getenv("TXMQ_DRAIN_BACKENDS"))
	fs.Var(&drains, "drain", "an old backend URL being drained (repeatable, or comma-separated; default $TXMQ_DRAIN_BACKENDS)")
	var queues stringList
	fs.Var(&queues, "queue", "a queue to include (repeatable, or comma-separated)")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q (queues are given with --queue)", fs.Arg(0))}
	}
	if *backendURL == "" && *f.url == "" && len(drains) == 0 {
		return &usageError{msg: "nothing to report on: set --backend (or TXMQ_BACKEND) and/or --database-url (or TXMQ_DATABASE_URL)"}
	}
	if *f.url == "" && len(queues) == 0 {
		return &usageError{msg: "without a database, name the queues to report on with --queue (a backend is asked about named queues only)"}
	}
	if err := f.resolveSchema(backendURL); err != nil {
		return err
	}
	for i, u := range drains {
		drains[i] = schemaset.ForDrain(*f.schema, u)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	rows := map[string]*queueStatus{}
	row := func(q string) *queueStatus {
		if rows[q] == nil {
			rows[q] = &queueStatus{Queue: q}
		}
		return rows[q]
	}
	for _, q := range queues {
		row(q)
	}
	if *f.url != "" {
		if err := statusFromDB(ctx, f, row, rows); err != nil {
			return err
		}
	}
	if *backendURL != "" {
		if err := statusFromBackend(ctx, *backendURL, rows); err != nil {
			return err
		}
	}
	olds, err := statusFromOldBackends(ctx, drains, rows)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(rows))
	for q := range rows {
		names = append(names, q)
	}
	sort.Strings(names)
	out := make([]*queueStatus, 0, len(names))
	for _, q := range names {
		out = append(out, rows[q])
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no queues: the outbox and dead-letter tables are empty (name queues with --queue to ask the backend)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tREADY\tIN FLIGHT\tDELAYED\tDEAD LETTERS\tOUTBOX\tOLDEST\t")
	for _, r := range out {
		age := "-"
		if r.OldestAgeSec != nil {
			age = (time.Duration(*r.OldestAgeSec * float64(time.Second))).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Queue, num(r.Ready), num(r.InFlight), num(r.Delayed), num(r.DeadLetters), num(r.OutboxRows), age)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printOldBackends(stdout, olds)
}

// statusFromDB adds every queue found in the outbox and dead-letter tables and fills the
// database columns of every row (zero for a queue without rows).
func statusFromDB(ctx context.Context, f *dbFlags, row func(string) *queueStatus, rows map[string]*queueStatus) error {
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	dead, err := store.DeadLetterCounts(ctx)
	if err != nil {
		return fmt.Errorf("reading dead letters: %w", err)
	}
	backlog, err := store.Backlog(ctx)
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	for q := range dead {
		row(q)
	}
	for q := range backlog {
		row(q)
	}
	for _, r := range rows {
		setDB(r, dead, backlog)
	}
	return nil
}

func setDB(r *queueStatus, dead map[string]int64, backlog map[string]outbox.Backlog) {
	d := dead[r.Queue]
	b := backlog[r.Queue]
	r.DeadLetters, r.OutboxRows, r.OutboxFailing = &d, &b.Rows, &b.Failing
	if b.Rows > 0 {
		age := b.OldestAge.Seconds()
		r.OldestAgeSec = &age
	}
}

// statusFromBackend fills the depth columns.
func statusFromBackend(ctx context.Context, rawURL string, rows map[string]*queueStatus) error {
	be, err := core.OpenBackend(ctx, rawURL)
	if err != nil {
		return err
	}
	defer func() { _ = be.Close() }()
	names := make([]string, 0, len(rows))
	for q := range rows {
		names = append(names, q)
	}
	if len(names) == 0 {
		return nil
	}
	depths, err := be.Depths(ctx, names)
	if err != nil {
		return fmt.Errorf("asking the backend for depths: %w", err)
	}
	for _, q := range names {
		d := depths[q]
		rows[q].Ready, rows[q].InFlight, rows[q].Delayed = &d.Ready, &d.InFlight, &d.Delayed
	}
	return nil
}

func num(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
