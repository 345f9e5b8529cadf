package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq/core/envelope"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register(&command{name: "dlq", summary: "dead letters: ls, show ID, replay ID|--queue Q, purge", run: runDLQ})
	register(&command{name: "outbox", summary: "outbox rows waiting to be published: ls", run: runOutbox})
}

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: txmq dlq ls|show|replay|purge [flags]\n\n  ls       list dead letters (--queue, --after, --limit, --json)\n  show ID  print one dead letter with its messages\n  replay   republish ID, or every dead letter of --queue, with the attempt count reset\n  purge    delete dead letters (--queue, or --all); asks on a terminal, --yes in scripts\n\nA --queue no source knows is refused (exit 1) with the known queues.")
		connectionHelp(stderr)
		if len(args) == 0 {
			return &usageError{msg: "missing subcommand"}
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "ls":
		return dlqList(ctx, args[1:], stdout, stderr)
	case "show":
		return dlqShow(ctx, args[1:], stdout, stderr)
	case "replay":
		return dlqReplay(ctx, args[1:], stdout, stderr)
	case "purge":
		return dlqPurge(ctx, args[1:], stdout, stderr)
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q: use ls, show, replay or purge", args[0])}
}

func dlqList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq ls", "dlq ls [--queue Q] [--after ID] [--limit N] [--json]", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "only this queue")
	after := fs.Int64("after", 0, "only ids greater than this (paging)")
	limit := fs.Int("limit", 100, "at most this many rows")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	rows, err := store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: *queue, AfterID: *after, Limit: *limit})
	if err != nil {
		return err
	}
	if len(rows) == 0 && *queue != "" {
		if err := f.requireKnown(ctx, *queue, "--queue", ""); err != nil {
			return err
		}
	}
	if *asJSON {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			out = append(out, dlqJSON(&r, false))
		}
		return printJSON(stdout, out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tBATCH\tREASON\tATTEMPTS\tMESSAGES\tLAST FAILED\tSTATE\tLAST ERROR")
	for _, r := range rows {
		state := "dead"
		if !r.Dead() {
			state = "replayed"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ID, r.Queue, r.BatchID, r.Reason, r.Attempts, r.Messages,
			r.LastFailedAt.UTC().Format(time.RFC3339), state, oneLine(r.LastError, 60))
	}
	return tw.Flush()
}

func dlqShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq show", "dlq show ID", stderr)
	f := addDBFlags(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	id, err := idArg(fs.Args())
	if err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	r, err := store.GetDeadLetter(ctx, id)
	if err != nil {
		return notFound(err, id, *f.schema)
	}
	return printJSON(stdout, dlqJSON(r, true))
}

func dlqReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq replay", "dlq replay ID | --queue Q  [--backend URL]", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "replay every dead letter of this queue")
	f.publishes = true
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*queue == "") == (fs.NArg() == 0) {
		return &usageError{msg: "give either one dead letter ID or --queue Q"}
	}
	var id int64
	if *queue == "" {
		var err error
		if id, err = idArg(fs.Args()); err != nil {
			return err
		}
	}
	if *f.backend == "" {
		return &usageError{msg: errNoBackend.Error()}
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	if *queue != "" {
		if err := f.requireKnown(ctx, *queue, "--queue", ""); err != nil {
			return err
		}
		n, err := store.ReplayQueue(ctx, *queue)
		fmt.Fprintf(stdout, "replayed %d dead letter(s) of queue %q\n", n, *queue)
		return err
	}
	if err := store.Replay(ctx, id); err != nil {
		return notFound(err, id, *f.schema)
	}
	fmt.Fprintf(stdout, "replayed dead letter %d\n", id)
	return nil
}

func dlqPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq purge", "dlq purge --queue Q | --all  [--yes]\n\nDeletes dead letters for good. On a terminal it asks for the queue's name (or \"all\") to be\ntyped back; in a script (stdin not a terminal) it needs --yes.", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "delete the dead letters of this queue")
	all := fs.Bool("all", false, "delete every dead letter")
	yes := addYesFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*queue == "") == !*all {
		return &usageError{msg: "give either --queue Q or --all"}
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	what, word := "delete every dead letter of every queue in schema "+fmt.Sprintf("%q", *f.schema), "all"
	if *queue != "" {
		if err := f.requireKnown(ctx, *queue, "--queue", ""); err != nil {
			return err
		}
		what, word = fmt.Sprintf("delete every dead letter of queue %q", *queue), *queue
	}
	if err := confirm(*yes, what, word, os.Stdin, stdinIsTerminal(), stderr); err != nil {
		return err
	}
	n, err := store.Purge(ctx, outbox.DLQFilter{Queue: *queue})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "purged %d dead letter(s)\n", n)
	return nil
}

func runOutbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "ls" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stderr, "Usage: txmq outbox ls [--queue Q] [--after ID] [--limit N] [--json]\n\nA --queue no source knows is refused (exit 1) with the known queues.")
			connectionHelp(stderr)
			return flag.ErrHelp
		}
		return &usageError{msg: "use: txmq outbox ls"}
	}
	fs := newFlags("outbox ls", "outbox ls [--queue Q] [--after ID] [--limit N] [--json]", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "only this queue")
	after := fs.Int64("after", 0, "only ids greater than this (paging)")
	limit := fs.Int("limit", 100, "at most this many rows")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	rows, err := store.ListOutbox(ctx, outbox.OutboxFilter{Queue: *queue, AfterID: *after, Limit: *limit})
	if err != nil {
		return err
	}
	if len(rows) == 0 && *queue != "" {
		if err := f.requireKnown(ctx, *queue, "--queue", ""); err != nil {
			return err
		}
	}
	if *asJSON {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			out = append(out, map[string]any{"id": r.ID, "queue": r.Queue, "batch_id": r.BatchID, "created_at": r.CreatedAt,
				"attempts": r.Attempts, "next_attempt_at": nullTime(r.NextAttemptAt), "not_before": nullTime(r.NotBefore), "last_error": r.LastError})
		}
		return printJSON(stdout, out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "outbox is empty")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tBATCH\tCREATED\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR")
	for _, r := range rows {
		next := "after recovery age"
		if !r.NextAttemptAt.IsZero() {
			next = r.NextAttemptAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Queue, r.BatchID, r.CreatedAt.UTC().Format(time.RFC3339), r.Attempts, next, oneLine(r.LastError, 60))
	}
	return tw.Flush()
}

func dlqJSON(r *outbox.DeadLetterRow, withMessages bool) map[string]any {
	m := map[string]any{"id": r.ID, "queue": r.Queue, "batch_id": r.BatchID, "reason": r.Reason, "last_error": r.LastError,
		"attempts": r.Attempts, "messages": r.Messages, "first_failed_at": r.FirstFailedAt, "last_failed_at": r.LastFailedAt,
		"replay_count": r.ReplayCount, "replayed_at": nullTime(r.ReplayedAt), "dead": r.Dead()}
	if withMessages {
		if ids, msgs, err := envelope.Messages(r.Body); err == nil {
			m["message_ids"] = ids
			m["payload"] = msgs
		} else {
			m["undecodable_body"] = string(r.Body)
		}
	}
	return m
}

// notFound turns a missing dead letter into a message that says how to list them; other
// errors pass unchanged.
func notFound(err error, id int64, schema string) error {
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("no dead letter %d in schema %q; list them with: txmq dlq ls (with the same --schema)", id, schema)
	}
	return err
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func idArg(args []string) (int64, error) {
	if len(args) != 1 {
		return 0, &usageError{msg: "give exactly one dead letter ID"}
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, &usageError{msg: fmt.Sprintf("%q is not a dead letter ID (a positive number; see txmq dlq ls)", args[0])}
	}
	return id, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func oneLine(s string, n int) string {
	b := []rune(s)
	for i, r := range b {
		if r == '\n' || r == '\t' {
			b[i] = ' '
		}
	}
	if len(b) > n {
		return string(b[:n-1]) + "…"
	}
	return string(b)
}
