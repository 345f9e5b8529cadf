package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestOutcomesLedger: with a ledger, each outcome group of a split batch leaves its own last
// state and reason per message (what `txmq msg` and the dashboard show): done completed,
// discarded completed with its reason, dropped dead (permanent), retried dead after its budget
// (delivery_exhausted), snoozed delayed until its due time.
func TestOutcomesLedger(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "outcomesledger", txmq.QueueConfig[string]{Transactional: txmq.Try, MaxAttempts: 2,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg}, Ledger: &ledger.Options{FlushInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	boom := errors.New("boom")
	err = q.Listen(app.Node, func(ctx context.Context, msgs []string) error {
		res := txmq.NewResults(msgs)
		for i, m := range msgs {
			switch m {
			case "retry":
				res.Retry(i, boom)
			case "snooze":
				res.Snooze(i, time.Hour)
			case "drop":
				res.Drop(i, boom)
			case "discard":
				res.Discard(i, "dup")
			}
		}
		return res.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := q.PublishMany(ctx, app.Node, []string{"done", "retry", "snooze", "drop", "discard"},
		txmq.IDs("o-done", "o-retry", "o-snooze", "o-drop", "o-discard")); err != nil {
		t.Fatal(err)
	}
	in := app.Inspector()
	for _, want := range []struct {
		id     string
		state  core.MessageState
		reason string
	}{
		{"o-done", core.StateCompleted, ""},
		{"o-discard", core.StateCompleted, "discarded: dup"},
		{"o-drop", core.StateDead, core.ReasonPermanent},
		{"o-retry", core.StateDead, core.ReasonDeliveryExhausted},
		{"o-snooze", core.StateDelayed, "snoozed"},
	} {
		var m txmq.MessageInfo
		txmqtest.Eventually(t, 20*time.Second, func() bool {
			m, err = in.Get(ctx, want.id)
			return err == nil && m.State == want.state && m.Reason == want.reason
		}, func() string {
			return fmt.Sprintf("message %s %s (%s): last %+v, error %v", want.id, want.state, want.reason, m, err)
		})
		if want.id == "o-snooze" && (m.Due.Before(start.Add(time.Hour-time.Minute)) || m.Due.After(time.Now().Add(time.Hour))) {
			t.Errorf("snoozed message due %v; want about an hour after %v", m.Due, start)
		}
	}
}
