package parity

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("outcomes",
		property{name: "ledger_last_outcome_per_message", run: ledgerLastOutcome},
	)
}

// ledgerLastOutcome: with a ledger, each message of a batch split by per-message outcomes ends
// with its own group's last state and reason (what `txmq msg` and the dashboard show): done
// completed, discarded completed with its reason, dropped dead (permanent), retried dead after
// its budget (delivery_exhausted), snoozed delayed until its due time. The ledger's long flush
// interval gathers the batch's events and its parts' into one write: a message then appears
// under two batches of the write.
func ledgerLastOutcome(x *X) {
	lg := x.ledgerFlushing(500 * time.Millisecond) // the publish, the run and the split in one write
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 2, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	o := x.steadyLease()
	o.Ledger = lg
	n := x.node(o)
	rec := newRecorder()
	listen(x, rec, q, n, func(ctx context.Context, msgs []Msg) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			switch m.P {
			case "retry":
				res.Retry(i, errBoom)
			case "snooze":
				res.Snooze(i, time.Hour)
			case "drop":
				res.Drop(i, errBoom)
			case "discard":
				res.Discard(i, "dup")
			}
		}
		return res.Err()
	})
	p := q.Name()
	roles := []string{"done", "retry", "snooze", "drop", "discard"}
	var msgs []Msg
	var ids []string
	for _, r := range roles {
		msgs = append(msgs, Msg{K: p + "-" + r, P: r})
		ids = append(ids, "oc/"+p+"/"+r)
	}
	start := time.Now()
	if err := q.PublishMany(context.Background(), n, msgs, txmq.IDs(ids...)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	want := map[string]struct {
		state  core.MessageState
		reason string
	}{
		"done": {core.StateCompleted, ""}, "discard": {core.StateCompleted, "discarded: dup"},
		"drop": {core.StateDead, core.ReasonPermanent}, "retry": {core.StateDead, core.ReasonDeliveryExhausted},
		"snooze": {core.StateDelayed, "snoozed"},
	}
	for i, r := range roles {
		var m core.MessageInfo
		var err error
		x.eventually(func() bool {
			m, err = lg.GetMessage(x.ctx(), ids[i])
			return err == nil && m.State == want[r].state && m.Reason == want[r].reason
		}, func() string {
			return fmt.Sprintf("message %s (%s): want %s (%s), last %+v, error %v", ids[i], r, want[r].state, want[r].reason, m, err)
		})
		if r == "snooze" && (m.Due.Before(start.Add(time.Hour-time.Minute)) || m.Due.After(time.Now().Add(time.Hour))) {
			x.T.Errorf("snoozed message due %v; want about an hour after %v", m.Due, start)
		}
	}
}
