package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
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
database). Every count is of batches (a batch holds one or more messages; txmq msg ls lists
messages). Without --queue the queues are those found in the outbox and dead-letter tables,
and those the backend lists (core.QueueLister: memory, postgres, redis, nats, sqs) that hold
ready, in-flight or delayed batches; with --queue, the queues named. A queue
named with --queue of which nothing is found (nothing in the backend, no outbox rows or dead
letters) is reported as unknown, with the known queues, and the exit code is 1. Works with
only a backend, only a database, or both. During a backend swap, --drain (default
$TXMQ_DRAIN_BACKENDS) adds each old backend's depths and whether it is empty: nodes with the
drain setting stop polling an empty old backend but re-check it, so remove it from
TXMQ_DRAIN_BACKENDS once no node runs the old setting and it shows empty here.`

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", statusSynopsis, stderr)
	f := addDBFlags(fs, false)
	backendURL := fs.String("backend", os.Getenv("TXMQ_BACKEND"), "backend URL to ask for depths (from $TXMQ_BACKEND when set)")
	var drains stringList
	_ = drains.Set(os.Getenv("TXMQ_DRAIN_BACKENDS"))
	fs.Var(&drains, "drain", "an old backend URL being drained (repeatable, or comma-separated; from $TXMQ_DRAIN_BACKENDS when set)")
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
	for _, q := range queues {
		if txmq.ValidateQueueName(q) != nil {
			return &usageError{msg: fmt.Sprintf("--queue %q is not a valid queue name: queue names are 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter", q)}
		}
	}
	if *backendURL != "" {
		if err := checkBackendURL(backendSetting, *backendURL, false); err != nil {
			return err
		}
	}
	for _, d := range drains {
		if err := checkBackendURL(drainSetting, d, false); err != nil {
			return err
		}
	}
	if err := f.resolveSchema(backendURL); err != nil {
		return err
	}
	for i, u := range drains {
		drains[i] = outbox.DrainBackendURL(*f.schema, u)
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
	var dbQueues map[string]bool // the queues with outbox rows or dead letters, replayed or not
	if *f.url != "" {
		var err error
		if dbQueues, err = statusFromDB(ctx, f, row, rows); err != nil {
			return err
		}
	}
	if *backendURL != "" {
		if err := statusFromBackend(ctx, *backendURL, rows, len(queues) == 0, *f.url != ""); err != nil {
			return err
		}
	}
	olds, err := statusFromOldBackends(ctx, drains, rows)
	if err != nil {
		return err
	}
	// During a swap (--drain) the operator watches named queues empty out: an empty queue is
	// the expected answer there, not a mistyped name.
	var unknown []string
	if len(drains) == 0 {
		unknown = unknownQueues(queues, dbQueues, rows)
	}
	if len(unknown) > 0 {
		var err error
		if unknown, err = stillUnknown(ctx, f, *backendURL, unknown); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(rows))
	for q := range rows {
		if !slices.Contains(unknown, q) {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	out := make([]*queueStatus, 0, len(names))
	for _, q := range names {
		out = append(out, rows[q])
	}
	var unknownErr error
	if len(unknown) > 0 {
		unknownErr = unknownQueuesError(unknown, names, *f.url != "")
	}
	if *asJSON {
		if err := printJSON(stdout, out); err != nil {
			return err
		}
		return unknownErr
	}
	if len(out) == 0 {
		if unknownErr != nil {
			return unknownErr
		}
		switch {
		case *f.url == "":
			fmt.Fprintln(stdout, "no queues: the backend holds no batches")
		case *backendURL == "":
			fmt.Fprintf(stdout, "no queues: no outbox rows or dead letters in schema %q (set %s to see the backend's queues too)\n", *f.schema, backendSetting)
		default:
			fmt.Fprintf(stdout, "no queues: no outbox rows or dead letters in schema %q, and no batches in the backend\n", *f.schema)
		}
		return nil
	}
	fmt.Fprintln(stdout, "batches per queue (a batch holds one or more messages):")
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
	if err := printOldBackends(stdout, olds); err != nil {
		return err
	}
	return unknownErr
}

// statusFromDB adds every queue found in the outbox and dead-letter tables and fills the
// database columns of every row (zero for a queue without rows).
// It returns the queues found in the database. A queue whose dead letters were all replayed
// is found too: its replayed batches are in the backend now.
func statusFromDB(ctx context.Context, f *dbFlags, row func(string) *queueStatus, rows map[string]*queueStatus) (map[string]bool, error) {
	store, done, err := f.openStore(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	dead, err := store.DeadLetterCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading dead letters: %w", err)
	}
	backlog, err := store.Backlog(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	found := map[string]bool{}
	for q := range dead {
		row(q)
		found[q] = true
	}
	for q := range backlog {
		row(q)
		found[q] = true
	}
	for _, r := range rows {
		setDB(r, dead, backlog)
	}
	return found, nil
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

// statusFromBackend fills the depth columns. With discover (no --queue), the queues the
// backend lists are added when they hold batches; a backend that cannot list its queues is
// then an error only when there is no database to find queues in (withDB).
func statusFromBackend(ctx context.Context, rawURL string, rows map[string]*queueStatus, discover, withDB bool) error {
	be, err := openBackend(ctx, backendSetting, rawURL, false)
	if err != nil {
		return err
	}
	defer func() { _ = be.Close() }()
	listed := map[string]bool{}
	if discover {
		qs, err := core.ListQueues(ctx, be)
		switch {
		case errors.Is(err, core.ErrListUnsupported) && !withDB:
			return &usageError{msg: "this backend cannot list its queues: name the queues to report on with --queue, or set " + databaseSetting.String()}
		case errors.Is(err, core.ErrListUnsupported):
		case err != nil:
			return unreachable(backendSetting, rawURL, "the backend", err)
		}
		for _, q := range qs {
			if rows[q] == nil {
				listed[q] = true
				rows[q] = &queueStatus{Queue: q}
			}
		}
	}
	names := make([]string, 0, len(rows))
	for q := range rows {
		names = append(names, q)
	}
	if len(names) == 0 {
		return nil
	}
	depths, err := be.Depths(ctx, names)
	if err != nil {
		return unreachable(backendSetting, rawURL, "the backend", err)
	}
	for _, q := range names {
		d := depths[q]
		if listed[q] && d.Ready+d.InFlight+d.Delayed == 0 {
			delete(rows, q) // listed by the backend only, and idle
			continue
		}
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

// unknownQueues returns the queues named with --queue of which nothing is known: no outbox
// rows or dead letters in the database (when there is one) and nothing ready, in flight or
// delayed in the backend (when there is one).
func unknownQueues(asked []string, dbQueues map[string]bool, rows map[string]*queueStatus) []string {
	var out []string
	for _, q := range asked {
		r := rows[q]
		if dbQueues[q] || slices.Contains(out, q) {
			continue
		}
		if r.Ready != nil && *r.Ready+*r.InFlight+*r.Delayed > 0 {
			continue
		}
		known := false
		for _, o := range r.Old {
			known = known || o.Ready+o.InFlight+o.Delayed > 0
		}
		if !known {
			out = append(out, q)
		}
	}
	return out
}

// unknownQueuesError returns the error that names the unknown queues and lists the known ones.
func unknownQueuesError(unknown, known []string, withDB bool) error {
	where := "nothing ready, in flight or delayed in the backend"
	if withDB {
		where += ", and no outbox rows or dead letters in the app database"
	}
	list := "known queues: " + strings.Join(known, ", ")
	switch {
	case len(known) == 0 && withDB:
		list = "no queue is known: the outbox and dead-letter tables are empty and the backend holds nothing of the queues named"
	case len(known) == 0:
		list = "a backend cannot list its queues: set " + databaseSetting.String() + " to list the queues with outbox rows or dead letters"
	}
	quoted := make([]string, len(unknown))
	for i, q := range unknown {
		quoted[i] = fmt.Sprintf("%q", q)
	}
	noun := "queue"
	if len(unknown) > 1 {
		noun = "queues"
	}
	return fmt.Errorf("unknown %s %s (%s); check the name given to --queue; %s", noun, strings.Join(quoted, ", "), where, list)
}

// stillUnknown returns the queues of unknown that no other source knows either: the pause
// marks, the schedules and the ledger of the app database, and the backend's queue listing
// (a queue with nothing in flight is known when it was paused ahead of a deploy, or when its
// backend keeps its storage).
func stillUnknown(ctx context.Context, f *dbFlags, backendURL string, unknown []string) ([]string, error) {
	f.backend = &backendURL
	if *f.url != "" {
		_, done, err := f.openStore(ctx)
		if err != nil {
			return nil, err
		}
		defer done()
	} else {
		defer f.close()
	}
	var out []string
	for _, q := range unknown {
		err := f.requireKnown(ctx, q, "", "")
		var u *unknownQueue
		switch {
		case err == nil:
		case errors.As(err, &u):
			out = append(out, q)
		default:
			return nil, err
		}
	}
	return out, nil
}
