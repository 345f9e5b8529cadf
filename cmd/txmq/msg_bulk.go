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

// bulkAction is one of the msg commands that act on every message of a queue in a state.
type bulkAction struct {
	name, synopsis, verb string              // "cancel", its synopsis, "cancel" as in "cancel every ..."
	states               []txmq.MessageState // the states it accepts
	can                  func(*txmq.Inspector) error
	run                  func(context.Context, *txmq.Inspector, core.MessageFilter) (txmq.BulkResult, error)
	done                 string // the report: count, state, queue, skipped
}

var (
	cancelWhere = bulkAction{
		name: "cancel", synopsis: "msg cancel --queue Q --state S [--since T] [--until T] [--yes]", verb: "cancel",
		states: txmq.BulkStates, can: (*txmq.Inspector).CanCancel, run: func(ctx context.Context, in *txmq.Inspector, f core.MessageFilter) (txmq.BulkResult, error) {
			return in.CancelWhere(ctx, f)
		},
		done: "cancelled %d %s message(s) of %s (%d skipped: claimed, completed or gone meanwhile)\n",
	}
	runNow = bulkAction{
		name: "run-now", synopsis: "msg run-now --queue Q --state delayed|retry [--since T] [--until T] [--yes]", verb: "run now",
		states: txmq.RunNowStates, can: (*txmq.Inspector).CanRunNow, run: func(ctx context.Context, in *txmq.Inspector, f core.MessageFilter) (txmq.BulkResult, error) {
			return in.RunNow(ctx, f)
		},
		done: "made %d %s message(s) of %s due now (%d skipped: claimed or gone meanwhile)\n",
	}
)

// msgBulk runs a bulk action on every message of a queue in a state, after the queue is
// known to a source and the operator confirmed.
func msgBulk(ctx context.Context, a bulkAction, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("msg "+a.name, a.synopsis, stderr)
	f := addDBFlags(fs, true)
	queue := fs.String("queue", "", "the queue whose messages to "+a.verb+" (required)")
	state := fs.String("state", "", "only this state, one of "+statesOf(a.states)+" (required)")
	since := fs.String("since", "", "only messages published at or after T (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only messages published before T (RFC 3339, or a duration ago)")
	yes := addYesFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q: msg %s selects by --queue and --state", fs.Arg(0), a.name)}
	}
	filter := core.MessageFilter{Queue: *queue, State: core.MessageState(*state)}
	if *queue == "" {
		return &usageError{msg: "--queue: name the queue whose messages to " + a.verb}
	}
	if !slices.Contains(a.states, filter.State) {
		return &usageError{msg: fmt.Sprintf("--state %q: use one of %s (a running batch is not interrupted)", *state, statesOf(a.states))}
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
	if err := a.can(in); err != nil {
		return err
	}
	if err := msgQueueKnown(ctx, f, *queue); err != nil {
		return err
	}
	if err := confirm(*yes, fmt.Sprintf("%s every %s message of %s", a.verb, *state, *queue), *queue, os.Stdin, stdinIsTerminal(), stderr); err != nil {
		return err
	}
	res, err := a.run(ctx, in, filter)
	if err != nil {
		return fmt.Errorf("%s: %d message(s) of %s done, then: %w", a.verb, res.Done, *queue, err)
	}
	fmt.Fprintf(stdout, a.done, res.Done, *state, *queue, res.Skipped)
	return nil
}

func statesOf(states []txmq.MessageState) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}
