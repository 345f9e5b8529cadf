package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
)

// A command that names a queue refuses one that no source knows, so that a typo never
// "succeeds" (a pause of a queue that does not exist, a replay or purge of nothing). The
// sources are those an operator's settings reach:
//
//   - the app database: dead letters (replayed or not), outbox rows, schedules, pause marks,
//     and the ledger when the app runs with one;
//   - the backend (--backend or TXMQ_BACKEND): its queue listing where the adapter has one
//     (core.QueueLister), and the depths of the queue asked about.

// queueSources lists the sources a queue is looked for in, for messages.
const queueSources = "the backend, the ledger, the outbox, the dead letters, the schedules or the pause marks"

// knownQueues returns the queues the listable sources know: the app database's tables (when
// f opened a store) and the backend's listing (when it has one). notes say which sources
// could not be asked, and why, for the operator.
func (f *dbFlags) knownQueues(ctx context.Context) (known map[string]bool, notes []string, err error) {
	known = map[string]bool{}
	if f.store != nil {
		dead, err := f.store.DeadLetterCounts(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading dead letters: %w", err)
		}
		backlog, err := f.store.Backlog(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the outbox: %w", err)
		}
		paused, err := f.store.Pauses().PausedQueues(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the pause marks: %w", err)
		}
		schedules, err := f.store.Ticks().Schedules(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the schedules: %w", err)
		}
		for q := range dead {
			known[q] = true
		}
		for q := range backlog {
			known[q] = true
		}
		for q := range paused {
			known[q] = true
		}
		for _, s := range schedules {
			known[s.Queue] = true
		}
	}
	be, berr := f.openedBackend(ctx)
	switch {
	case berr != nil:
		notes = append(notes, "the backend could not be asked: "+message(berr))
	case be == nil:
		notes = append(notes, "no backend was asked: set --backend or TXMQ_BACKEND")
	default:
		qs, err := core.ListQueues(ctx, be)
		switch {
		case errors.Is(err, core.ErrListUnsupported):
			notes = append(notes, "this backend cannot list its queues")
		case err != nil:
			notes = append(notes, "the backend could not list its queues: "+message(core.RedactError(err, f.backendURL())))
		}
		for _, q := range qs {
			known[q] = true
		}
	}
	return known, notes, nil
}

// queueKnown reports whether queue is known to a source that cannot list its queues: the
// backend's depths (work ready, in flight or delayed) or the ledger (a message of the queue).
func (f *dbFlags) queueKnown(ctx context.Context, queue string) (bool, error) {
	if be, _ := f.openedBackend(ctx); be != nil {
		d, err := be.Depths(ctx, []string{queue})
		if err == nil && d[queue].Ready+d[queue].InFlight+d[queue].Delayed > 0 {
			return true, nil
		}
	}
	if f.pool == nil {
		return false, nil
	}
	o := &ledger.Options{Schema: *f.schema, NoPrune: true}
	ok, err := ledger.Exists(ctx, f.pool, o)
	if err != nil || !ok {
		return false, err
	}
	l, err := ledger.New(f.pool, o)
	if err != nil {
		return false, err
	}
	defer func() { _ = l.Close(context.WithoutCancel(ctx)) }()
	ms, err := l.ListMessages(ctx, core.MessageFilter{Queue: queue, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("reading the ledger: %w", err)
	}
	return len(ms) > 0, nil
}

// requireKnown returns nil when some source knows queue, else an error that names it, says
// where it was looked for and lists the known queues; remedy, when not empty, is added (how
// to go on anyway, for a pause ahead of a deploy). name is how the command took the queue
// ("--queue", or "" for a positional argument).
func (f *dbFlags) requireKnown(ctx context.Context, queue, name, remedy string) error {
	known, notes, err := f.knownQueues(ctx)
	if err != nil {
		return err
	}
	if known[queue] {
		return nil
	}
	ok, err := f.queueKnown(ctx, queue)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	return unknownQueueError(queue, name, known, notes, remedy)
}

// unknownQueueError builds requireKnown's error.
func unknownQueueError(queue, name string, known map[string]bool, notes []string, remedy string) error {
	names := make([]string, 0, len(known))
	for q := range known {
		names = append(names, q)
	}
	sort.Strings(names)
	list := "no queue is known yet"
	if len(names) > 0 {
		list = "known queues: " + strings.Join(names, ", ")
	}
	what := fmt.Sprintf("queue %q", queue)
	if name != "" {
		what = fmt.Sprintf("%s %q", name, queue)
	}
	msg := fmt.Sprintf("unknown queue: %s is not in %s; check the name; %s", what, queueSources, list)
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	if remedy != "" {
		msg += "; " + remedy
	}
	return &unknownQueue{msg: msg}
}

// unknownQueue is requireKnown's error: no source knows the queue.
type unknownQueue struct{ msg string }

func (e *unknownQueue) Error() string { return e.msg }
