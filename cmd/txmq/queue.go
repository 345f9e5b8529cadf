package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/txmq/txmq"
)

func init() {
	register(&command{name: "queue", summary: "pause and resume queues cluster-wide: pause Q, resume Q, paused", run: runQueue})
	register(&command{name: "schedule", summary: "periodic publishes: ls (last and next tick of each)", run: runSchedule})
}

func runSchedule(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "ls" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stderr, "Usage: txmq schedule ls [--json]\n\nLists the schedules that published a tick, with their queue, last and next tick (from the app database).")
			connectionHelp(stderr)
			return flag.ErrHelp
		}
		return &usageError{msg: "use: txmq schedule ls"}
	}
	fs := newFlags("schedule ls", "schedule ls [--json]", stderr)
	f := addDBFlags(fs, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	rows, err := store.Ticks().Schedules(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no schedule has published a tick yet")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tQUEUE\tLAST TICK\tNEXT TICK")
	for _, r := range rows {
		next := "-"
		if !r.NextTick.IsZero() {
			next = r.NextTick.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Schedule, r.Queue, r.LastTick.UTC().Format(time.RFC3339), next)
	}
	return tw.Flush()
}

func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: txmq queue pause Q [--by WHO] [--create] | resume Q | paused [--json]\n\n  pause Q   no node of the app starts a new batch of Q (within a second or so); running batches finish\n  resume Q  nodes start Q's batches again\n  paused    list the paused queues\n\nThe mark is kept in the app database (--database-url or TXMQ_DATABASE_URL), which every node reads.\nA queue no source knows (the backend, the ledger, the outbox, dead letters, schedules, pause\nmarks) is refused (exit 1) with the known queues; pause --create pauses it anyway, ahead of\nthe deploy that brings it.")
		connectionHelp(stderr)
		if len(args) == 0 {
			return &usageError{msg: "missing subcommand"}
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "pause", "resume":
		return queuePauseResume(ctx, args[0], args[1:], stdout, stderr)
	case "paused":
		return queuePaused(ctx, args[1:], stdout, stderr)
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q: use pause, resume or paused", args[0])}
}

func queuePauseResume(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("queue "+verb, "queue "+verb+" Q", stderr)
	f := addDBFlags(fs, true)
	by := fs.String("by", "", "who pauses it, for the record (default: $USER)")
	var create *bool
	if verb == "pause" {
		create = fs.Bool("create", false, "pause a queue that no source knows yet (ahead of the deploy that brings it)")
	}
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		return &usageError{msg: "name the queue: txmq queue " + verb + " Q"}
	}
	queue := args[0]
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := txmq.ValidateQueueName(queue); err != nil {
		return &usageError{msg: err.Error()}
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	if create == nil || !*create {
		remedy := ""
		if verb == "pause" {
			remedy = "to pause it ahead of the deploy that brings it, add --create"
		}
		if err := f.requireKnown(ctx, queue, "", remedy); err != nil {
			return err
		}
	}
	if verb == "resume" {
		if err := store.Pauses().Resume(ctx, queue); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resumed %s: nodes start its batches again within a second or so\n", queue)
		return nil
	}
	who := *by
	if who == "" {
		who = os.Getenv("USER")
	}
	if err := store.Pauses().Pause(ctx, queue, who); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "paused %s: nodes start no new batch of it within a second or so; running batches finish (txmq queue resume %s to undo)\n", queue, queue)
	return nil
}

func queuePaused(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("queue paused", "queue paused [--json]", stderr)
	f := addDBFlags(fs, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	store, done, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer done()
	ps, err := store.Pauses().PausedQueues(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ps))
	for q := range ps {
		names = append(names, q)
	}
	sort.Strings(names)
	if *asJSON {
		type row struct {
			Queue    string    `json:"queue"`
			PausedAt time.Time `json:"paused_at"`
			PausedBy string    `json:"paused_by"`
		}
		out := make([]row, 0, len(names))
		for _, q := range names {
			out = append(out, row{q, ps[q].PausedAt, ps[q].PausedBy})
		}
		return printJSON(stdout, out)
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, "no queue is paused")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPAUSED AT\tBY")
	for _, q := range names {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", q, ps[q].PausedAt.UTC().Format(time.RFC3339), ps[q].PausedBy)
	}
	return tw.Flush()
}
