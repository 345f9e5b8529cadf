package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// bulkArgs says whether `msg cancel` args select by filter (--queue) rather than by id.
func bulkArgs(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "--queue" || a == "-queue" || strings.HasPrefix(a, "--queue=") || strings.HasPrefix(a, "-queue=")
	})
}

// msgCancelWhere cancels every message of a queue in a waiting state (txmq.Inspector's
// CancelWhere), after the queue is known to a source and the operator confirmed.
func msgCancelWhere(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("msg cancel", "msg cancel --queue Q --state S [--since T] [--until T] [--yes]", stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "cancel the messages of this queue (required)")
	state := fs.String("state", "", "only this state, one of "+bulkStatesText()+" (required)")
	since := fs.String("since", "", "only messages published at or after T (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only messages published before T (RFC 3339, or a duration ago)")
	yes := addYesFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q: cancel takes one message id or --queue with --state, not both", fs.Arg(0))}
	}
	filter := core.MessageFilter{Queue: *queue, State: core.MessageState(*state)}
	if *queue == "" {
		return &usageError{msg: "--queue: name the queue whose messages to cancel"}
	}
	if !slices.Contains(txmq.BulkStates, filter.State) {
		return &usageError{msg: fmt.Sprintf("--state %q: use one of %s (a running batch is not interrupted)", *state, bulkStatesText())}
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
	if err := in.CanCancel(); err != nil {
		return err
	}
	if err := msgQueueKnown(ctx, f, *queue); err != nil {
		return err
	}
	if err := confirm(*yes, fmt.Sprintf("cancel every %s message of %s", *state, *queue), *queue, os.Stdin, stdinIsTerminal(), stderr); err != nil {
		return err
	}
	res, err := in.CancelWhere(ctx, filter)
	if err != nil {
		return fmt.Errorf("cancelled %d message(s) of %s, then: %w", res.Done, *queue, err)
	}
	fmt.Fprintf(stdout, "cancelled %d %s message(s) of %s (%d skipped: claimed, completed or gone meanwhile)\n", res.Done, *state, *queue, res.Skipped)
	return nil
}

func bulkStatesText() string {
	s := make([]string, len(txmq.BulkStates))
	for i, st := range txmq.BulkStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}
