package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// This file settles a run whose listener reported an outcome per message (core.Results, or
// a whole-batch txmq.Snooze / txmq.Discard): see "Outcomes" in the package doc of txmq and
// docs/outcomes-design.md. The plain paths (nil, a plain error) never come here: afterRun
// asks only for a non-nil error, and core.ResultsOf costs one type assertion and, for a plain
// error, the errors.As walks the Permanent check already does.

// SubsetOnError is implemented by a Batch's Calls that can call the queue's OnError with some
// of the batch's messages (the drop group of a split batch). Without it the whole batch is
// passed.
type SubsetOnError interface {
	// OnErrorOf calls OnError with the messages at the indexes keep, in order.
	OnErrorOf(keep []int, err error, attempts int) error
}

// outcomeGroup is the messages of a run that take one path.
type outcomeGroup struct {
	kind   core.OutcomeKind
	delay  time.Duration // retry and snooze
	reason string        // drop: its drop reason; discard: the listener's reason
	err    error         // retry and drop: the first message's error
	idx    []int         // the messages, ascending
}

// maxDerivedBase is the longest batch id a derived id keeps as is: a longer one (a part split
// again and again) is replaced by a hash of itself, so that derived ids stay short.
const maxDerivedBase = 64

// derivedID is the batch id of group g of a split of the batch base with attempt runs spent
// before its stored copy: <base>/<attempt>/<kind>-<hash of the group's ids, delay and reason>,
// with <attempt>.r<replays> in a dead-letter replay's generation replays (above 0).
// A second copy of the same split (duplicate delivery, or a redelivery after a crash between
// the steps) gets the same id; a different split of the same copy gets another.
func derivedID(base string, attempt, replays int, g *outcomeGroup, ids []string) string {
	if len(base) > maxDerivedBase {
		sum := sha256.Sum256([]byte(base))
		base = "h" + hex.EncodeToString(sum[:12])
	}
	h := fnv.New32a()
	for _, i := range g.idx {
		h.Write([]byte(ids[i]))
		h.Write([]byte{0})
	}
	h.Write([]byte(strconv.FormatInt(int64(g.delay), 10)))
	h.Write([]byte{0})
	h.Write([]byte(g.reason))
	if replays > 0 { // a replay's parts are not the original's (see envelope.Replays)
		return fmt.Sprintf("%s/%d.r%d/%s-%08x", base, attempt, replays, g.kind, h.Sum32())
	}
	return fmt.Sprintf("%s/%d/%s-%08x", base, attempt, g.kind, h.Sum32())
}

// planOutcomes groups the messages of a run by the path each takes: a retry past the budget
// becomes a drop (delivery_exhausted), a snooze past MaxSnoozes a drop (snooze_exhausted).
// Groups come in order of their first message.
func (rn *runner) planOutcomes(spec *Spec, d *Batch, run int, res *core.Results) []*outcomeGroup {
	maxSnoozes := spec.MaxSnoozes
	if maxSnoozes <= 0 {
		maxSnoozes = core.DefaultMaxSnoozes
	}
	var groups []*outcomeGroup
	find := func(kind core.OutcomeKind, delay time.Duration, reason string, err error) *outcomeGroup {
		for _, g := range groups {
			if g.kind == kind && g.delay == delay && g.reason == reason && (kind != core.OutcomeDrop || errText(g.err) == errText(err)) {
				return g
			}
		}
		g := &outcomeGroup{kind: kind, delay: delay, reason: reason, err: err}
		groups = append(groups, g)
		return g
	}
	backoff := time.Duration(-1)
	for i := range d.Count {
		o := res.Outcome(i)
		var g *outcomeGroup
		switch o.Kind {
		case core.OutcomeRetry:
			switch {
			case run >= spec.MaxAttempts:
				g = find(core.OutcomeDrop, 0, core.ReasonDeliveryExhausted, o.Err)
			case o.HasDelay:
				g = find(core.OutcomeRetry, o.Delay, "", o.Err)
			default:
				if backoff < 0 {
					backoff = rn.backoff(spec, run)
				}
				g = find(core.OutcomeRetry, backoff, "", o.Err)
			}
		case core.OutcomeSnooze:
			if d.Snoozes >= maxSnoozes {
				g = find(core.OutcomeDrop, 0, core.ReasonSnoozeExhausted,
					fmt.Errorf("queue %q: message snoozed %d times, its queue's MaxSnoozes", spec.Name, d.Snoozes))
			} else {
				g = find(core.OutcomeSnooze, o.Delay, "", nil)
			}
		case core.OutcomeDrop:
			g = find(core.OutcomeDrop, 0, core.ReasonPermanent, o.Err)
		case core.OutcomeDiscard:
			g = find(core.OutcomeDiscard, 0, o.Reason, nil)
		default:
			g = find(core.OutcomeDone, 0, "", nil)
		}
		g.idx = append(g.idx, i)
	}
	return groups
}

// outcomes settles a run whose error carries per-message outcomes, and reports whether it
// did; false leaves runErr to the plain policy (it carries none, or Results built for a slice
// of another length, which is logged).
func (rn *runner) outcomes(r *running, l *Listener, d *Batch, run int, ids []string, runErr error, release func()) bool {
	res := core.ResultsOf(runErr, d.Count)
	if res == nil || errors.Is(runErr, core.ErrRunTimeout) {
		return false // a timed-out run is the plain failure, whatever it returned late
	}
	n := rn.e
	c := r.claim
	if res.Len() != d.Count {
		n.log.Error("txmq: the listener returned Results built for another slice; failing the whole batch (build them with NewResults(msgs) on the slice the listener received)",
			"queue", c.Queue, "batch", d.ID, "results", res.Len(), "messages", d.Count)
		return false
	}
	groups := rn.planOutcomes(l.Spec, d, run, res)
	if len(groups) == 1 && rn.settleWhole(r, l, d, run, ids, groups[0], release) {
		return true
	}
	rn.settleSplit(r, l, d, run, ids, groups)
	return true
}

// settleWhole settles a run whose messages all take the path of g, as the plain policy would
// (Ack, Retry, terminal), and reports whether it did: a snooze takes the split path (a part
// of its own), because an adapter that retries in place would keep the old body and spend the
// run.
func (rn *runner) settleWhole(r *running, l *Listener, d *Batch, run int, ids []string, g *outcomeGroup, release func()) bool {
	n := rn.e
	c := r.claim
	switch g.kind {
	case core.OutcomeDone:
		n.stats.succeeded.Add(1)
		rn.ack(r, d, ids, run, release, "")
	case core.OutcomeDiscard:
		n.stats.succeeded.Add(1)
		rn.discarded(c.Queue, d.ID, nil, g, run)
		rn.ack(r, d, ids, run, release, discardReason(g))
	case core.OutcomeRetry:
		n.stats.failed.Add(1)
		at := time.Now()
		if rn.retry(r, d, run, g.delay, g.err) {
			n.record(c.Queue, d.ID, ids, core.BatchEvent{State: core.StateRetry, UpdatedAt: at, Due: at.Add(g.delay), Node: n.id, Runs: run, Error: errText(g.err)})
		}
	case core.OutcomeDrop:
		n.stats.failed.Add(1)
		rn.terminal(r, l.Spec, d, g.reason, g.err, run)
	default:
		return false
	}
	return true
}

// ack acks the claim of a run that needs no other settle, and records its messages completed
// (with reason, for a discard).
func (rn *runner) ack(r *running, d *Batch, ids []string, run int, release func(), reason string) {
	n := rn.e
	c := r.claim
	release()
	err := rn.settle(r, "Ack", func(ctx context.Context) error { return n.backend.Ack(ctx, c) })
	if err == nil {
		n.record(c.Queue, d.ID, ids, core.BatchEvent{State: core.StateCompleted, Node: n.id, Runs: run, Reason: reason})
	}
	rn.settleErr(c, "ack", err)
}

// discardReason is the ledger's reason of the discard group g.
func discardReason(g *outcomeGroup) string { return core.ReasonDiscarded + ": " + g.reason }

// discarded counts and logs the discard group g (by messages: the metric
// batches_dropped{reason="discarded"} counts them), and records it in the ledger under batch
// (a derived id of its own in a split, so that the batch's other messages keep their state)
// when ids are given.
func (rn *runner) discarded(queue, batch string, ids []string, g *outcomeGroup, run int) {
	n := rn.e
	msgs := len(g.idx)
	n.guard("discard bookkeeping", func() {
		n.stats.drop(core.ReasonDiscarded)
		n.log.Info("txmq: messages discarded by the listener", "queue", queue, "batch", batch, "messages", msgs, "reason", g.reason)
		if n.hooks.Dropped != nil {
			n.safeHook("Dropped", func() { n.hooks.Dropped(queue, core.ReasonDiscarded, msgs) })
		}
	})
	if n.recorder != nil && len(ids) > 0 {
		n.record(queue, batch, pick(ids, g.idx), core.BatchEvent{State: core.StateCompleted, Node: n.id, Runs: run, Reason: discardReason(g)})
	}
}

// pick returns ids at the indexes idx.
func pick(ids []string, idx []int) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = ids[i]
	}
	return out
}

// settleSplit settles a run whose messages take several paths: the drop groups are
// dead-lettered under their derived ids (with OnError for their messages), the discard
// groups counted, then the retry and snooze groups become batches of their own (parts) and the
// claim is removed: in one step by a core.Splitter, else each part published and then the
// claim acked. On an ordered queue the first retried or snoozed message holds the key: it and
// every message after it go back as the claim's new body (Retry), at the head of the key.
func (rn *runner) settleSplit(r *running, l *Listener, d *Batch, run int, ids []string, groups []*outcomeGroup) {
	n := rn.e
	c := r.claim
	spec := l.Spec
	env, err := envelope.Decode(c.Body)
	if err != nil { // cannot happen: the body decoded a moment ago
		n.stats.failed.Add(1)
		n.log.Error("txmq: batch with per-message outcomes did not decode again; retrying it whole", "queue", c.Queue, "batch", d.ID, "error", err)
		rn.retry(r, d, run, rn.backoff(spec, run), err)
		return
	}
	if len(env.Messages) != d.Count { // cancelled messages were left out of the run
		want := d.MessageIDs.IDs()
		j := 0
		env.KeepMessages(func(i int) bool {
			if j < len(want) && env.MessageIDs[i] == want[j] {
				j++
				return true
			}
			return false
		})
	}
	if ids == nil {
		ids = env.MessageIDs
	}
	var head *outcomeGroup // ordered: the group that holds the key
	if spec.Ordered && env.Key != "" {
		groups, head = holdKey(groups, d.Count)
		if head != nil && len(head.idx) > 1 {
			n.log.Info("txmq: ordered batch: the messages after the first retried or snoozed one go back with it, in order, whatever their outcome (they ran out of order)",
				"queue", c.Queue, "batch", d.ID, "key", env.Key, "head", head.idx[0], "messages", len(head.idx))
		}
	}
	failed := false
	for _, g := range groups {
		switch g.kind {
		case core.OutcomeDrop:
			failed = true
			rn.deadLetterGroup(r, spec, d, env, g, run)
		case core.OutcomeDiscard:
			rn.discarded(c.Queue, derivedID(d.ID, d.Attempt, d.Replays, g, env.MessageIDs), ids, g, run)
		case core.OutcomeDone:
			// recorded once the claim is settled
		default:
			failed = true
		}
	}
	if failed {
		n.stats.failed.Add(1)
	} else {
		n.stats.succeeded.Add(1)
	}
	var parts []core.Part
	var partGroups []*outcomeGroup
	for _, g := range groups {
		if g == head || (g.kind != core.OutcomeRetry && g.kind != core.OutcomeSnooze) {
			continue
		}
		parts = append(parts, rn.part(spec, env, d, g, run))
		partGroups = append(partGroups, g)
	}
	at := time.Now()
	var settleErr error
	switch {
	case head != nil:
		p := rn.part(spec, env, d, head, run)
		settleErr = rn.settle(r, "Retry", func(ctx context.Context) error { return n.backend.Retry(ctx, c, p.Body, head.delay) })
		if settleErr == nil {
			parts, partGroups = append(parts, p), append(partGroups, head)
		}
	case len(parts) == 0:
		settleErr = rn.settle(r, "Ack", func(ctx context.Context) error { return n.backend.Ack(ctx, c) })
	default:
		if sp, ok := n.backend.(core.Splitter); ok {
			settleErr = rn.settle(r, "Split", func(ctx context.Context) error { return sp.Split(ctx, c, parts) })
			if !errors.Is(settleErr, errors.ErrUnsupported) { // a wrapper whose backend cannot split
				break
			}
			settleErr = nil
		}
		for _, p := range parts {
			if settleErr = rn.publishPart(r, p); settleErr != nil {
				break
			}
		}
		if settleErr == nil {
			settleErr = rn.settle(r, "Ack", func(ctx context.Context) error { return n.backend.Ack(ctx, c) })
		}
	}
	if settleErr != nil {
		rn.settleErr(c, "split", settleErr)
		return
	}
	for _, g := range groups {
		if g.kind == core.OutcomeDone {
			n.record(c.Queue, d.ID, pick(ids, g.idx), core.BatchEvent{State: core.StateCompleted, Node: n.id, Runs: run})
		}
	}
	for i, g := range partGroups {
		p := parts[i]
		if g.kind == core.OutcomeSnooze {
			n.stats.snoozed.Add(1)
			n.log.Info("txmq: messages snoozed", "queue", c.Queue, "batch", d.ID, "part", p.ID, "messages", p.Messages, "snooze", g.delay)
			n.record(c.Queue, p.ID, p.MessageIDs, core.BatchEvent{State: core.StateDelayed, UpdatedAt: at, Due: at.Add(g.delay), Node: n.id, Runs: run - 1, Reason: "snoozed"})
			continue
		}
		n.stats.retried.Add(1)
		n.log.Info("txmq: messages failed; retrying", "queue", c.Queue, "batch", d.ID, "part", p.ID, "messages", p.Messages, "run", run, "retry_in", g.delay, "error", g.err)
		if n.hooks.Retried != nil {
			n.safeHook("Retried", func() { n.hooks.Retried(c.Queue, run, g.delay) })
		}
		n.record(c.Queue, p.ID, p.MessageIDs, core.BatchEvent{State: core.StateRetry, UpdatedAt: at, Due: at.Add(g.delay), Node: n.id, Runs: run, Error: errText(g.err)})
	}
}

// holdKey returns the groups of an ordered batch with its head group: the first retried or
// snoozed message and every message after it, which go back together, in order, with the
// head's outcome; nil when no message holds the key.
func holdKey(groups []*outcomeGroup, count int) ([]*outcomeGroup, *outcomeGroup) {
	first := count
	var headOf *outcomeGroup
	for _, g := range groups {
		if (g.kind == core.OutcomeRetry || g.kind == core.OutcomeSnooze) && g.idx[0] < first {
			first, headOf = g.idx[0], g
		}
	}
	if headOf == nil {
		return groups, nil
	}
	head := &outcomeGroup{kind: headOf.kind, delay: headOf.delay, err: headOf.err}
	for i := first; i < count; i++ {
		head.idx = append(head.idx, i)
	}
	out := make([]*outcomeGroup, 0, len(groups)+1)
	for _, g := range groups {
		kept := &outcomeGroup{kind: g.kind, delay: g.delay, reason: g.reason, err: g.err}
		for _, i := range g.idx {
			if i < first {
				kept.idx = append(kept.idx, i)
			}
		}
		if len(kept.idx) > 0 {
			out = append(out, kept)
		}
	}
	return append(out, head), head
}

// part encodes group g of the batch env as a batch of its own: the group's messages with
// their ids and trace contexts, a derived id, attempt run (a retry) or run-1 with one more
// snooze (a snooze), due after g.delay.
func (rn *runner) part(spec *Spec, env *envelope.Envelope, d *Batch, g *outcomeGroup, run int) core.Part {
	p := *env
	p.ID = derivedID(d.ID, d.Attempt, d.Replays, g, env.MessageIDs)
	p.Attempt = run
	if g.kind == core.OutcomeSnooze {
		p.Attempt, p.Snoozes = run-1, env.Snoozes+1
	}
	p.DedupMillis = 0 // the ids were deduplicated at their publish; a part must not be refused as a repeat
	p.Due = time.Time{}
	if g.delay > 0 {
		p.Due = time.Now().Add(g.delay)
	}
	in := make(map[int]bool, len(g.idx))
	for _, i := range g.idx {
		in[i] = true
	}
	p.KeepMessages(func(i int) bool { return in[i] })
	return core.Part{ID: p.ID, Queue: env.Queue, Body: envelope.Encode(&p), Delay: g.delay, NotBefore: p.Due,
		Exclusive: spec.Exclusive, Messages: len(p.Messages), Key: p.Key, MessageIDs: p.MessageIDs,
		Priority: p.Priority, Lead: time.Duration(p.LeadMicros) * time.Microsecond, // a part keeps its batch's priority
		FairKey: p.FairKey} // and its fairness key
}

// publishPart publishes one part of a split batch on a backend without core.Splitter, on a
// detached context bounded by ClaimTimeout and by the claim's fence (a part published after the
// claim was lost could duplicate the batch's next run elsewhere).
func (rn *runner) publishPart(r *running, p core.Part) error {
	n := rn.e
	var err error
	for i := range settleAttempts {
		now := time.Now()
		fenceAt, ok := rn.holdsAt(r, now)
		if !ok {
			return errFenced
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest(fenceAt, now.Add(n.opts.ClaimTimeout)))
		err = safeBackendCall("Publish", func() error { return n.backend.Publish(ctx, p) })
		cancel()
		if err == nil || !isUnavailable(err) || i == settleAttempts-1 {
			return err
		}
		time.Sleep(settleBackoff(i))
	}
	return err
}

// deadLetterGroup takes the drop group g of a split batch down the terminal path under its
// derived id: dead letter (the group's messages), count and log, ledger, OnError with its
// messages. It runs once per derived id, as terminal does per batch id; the claim is settled
// by the caller.
func (rn *runner) deadLetterGroup(r *running, spec *Spec, d *Batch, env *envelope.Envelope, g *outcomeGroup, run int) {
	n := rn.e
	c := r.claim
	p := rn.part(spec, env, d, g, run)
	msgs := len(g.idx)
	key := terminalKey(c.Queue, p.ID, d.Replays)
	if rn.terminals.seen(key) {
		return
	}
	if sink := n.opts.DeadLetters; sink != nil {
		var err error
		if perr := n.guard("dead-letter sink", func() {
			ctx, cancel := n.claimCtx()
			defer cancel()
			err = sink.DeadLetter(ctx, &core.DeadLetter{Queue: c.Queue, BatchID: p.ID, Body: p.Body, Reason: g.reason,
				Error: errText(g.err), Attempts: run, Messages: msgs, Exclusive: spec.Exclusive, At: time.Now(), Replays: d.Replays})
		}); perr != nil {
			err = perr
		}
		switch {
		case errors.Is(err, core.ErrAlreadyDeadLettered):
			rn.terminals.add(key)
			n.log.Warn("txmq: message group already dead-lettered (a second copy of the run); not again, without OnError", "queue", c.Queue, "batch", p.ID, "reason", g.reason)
			return
		case err != nil:
			n.guard("drop bookkeeping", func() {
				n.dropped(c.Queue, core.ReasonDeadLetterFailed, msgs, "txmq: dead-letter sink failed; messages dropped without a dead letter", "batch", p.ID, "error", err)
			})
		}
	}
	rn.terminals.add(key)
	n.guard("drop bookkeeping", func() {
		n.dropped(c.Queue, g.reason, msgs, "txmq: messages dropped", "batch", p.ID, "of", d.ID, "attempts", run, "error", g.err)
	})
	n.record(c.Queue, p.ID, p.MessageIDs, core.BatchEvent{State: core.StateDead, Node: n.id, Runs: run, Error: errText(g.err), Reason: g.reason})
	if d.HasOnError {
		n.guard("OnError", func() {
			var err error
			if sub, ok := d.Calls.(SubsetOnError); ok {
				err = sub.OnErrorOf(g.idx, g.err, run)
			} else {
				err = d.Calls.OnError(g.err, run)
			}
			if err != nil {
				n.log.Error("txmq: OnError returned an error (ignored)", "queue", c.Queue, "batch", p.ID, "error", err)
			}
		})
	}
}
