package txmq

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestScheduleConfigRefusals: a TZ= prefix is refused (Location says it), any Location is
// accepted (a fixed zone has no name to load), and an Ordered queue is refused.
func TestScheduleConfigRefusals(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	q := MustDeclareIn(reg, "sched-loc", QueueConfig[int]{Transactional: Try})
	if err := q.Schedule("fixed", ScheduleConfig[int]{Cron: "0 2 * * *", Location: time.FixedZone("UTC+05:30", 19800)}); err != nil {
		t.Errorf("a fixed-zone Location: %v", err)
	}
	if err := q.Schedule("tz", ScheduleConfig[int]{Cron: "CRON_TZ=Europe/Berlin 0 2 * * *"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Location") {
		t.Errorf("a TZ= prefix: %v; want ErrInvalidConfig pointing to Location", err)
	}
	ordered := MustDeclareIn(reg, "sched-ordered", QueueConfig[int]{Transactional: Try, Ordered: true})
	if err := ordered.Schedule("o", ScheduleConfig[int]{Cron: "@hourly"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), `queue "sched-ordered" is Ordered`) {
		t.Errorf("a schedule on an Ordered queue: %v; want ErrInvalidConfig naming the queue", err)
	}
}

// TestScheduleTickStagedWhateverRouting: a tick's messages are staged in the claim's
// transaction on Require, Try and Never queues alike (nothing waits for the commit in the
// node's buffer); without a transaction (a TickClaimer that has none) they follow the queue's
// routing.
func TestScheduleTickStagedWhateverRouting(t *testing.T) {
	t.Parallel()
	tick := time.Unix(1_800_000_000, 0)
	for _, mode := range []Transactional{Require, Try, Never} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			n, _ := newTestNode(t, &NodeOptions{FlushWindow: time.Hour, FlushCap: time.Hour})
			q := MustDeclareIn(n.Registry(), "tick-"+strings.ToLower(mode.String()), QueueConfig[int]{Transactional: mode})
			if err := q.Schedule("s", ScheduleConfig[int]{Cron: "@every 5s", Messages: func(time.Time) []int { return []int{1, 2} }}); err != nil {
				t.Fatal(err)
			}
			spec := n.reg.schedules["s"]
			tx := &fakeTx{}
			if err := spec.publish(core.ContextWithTx(context.Background(), tx), n, tick); err != nil {
				t.Fatalf("publishing the tick in the claim's transaction: %v", err)
			}
			if len(tx.Staged) != 1 || len(tx.AfterCommits) != 0 || int(n.Stats().Buffered) != 0 {
				t.Fatalf("staged %d publishes, %d waiting for the commit, %d buffered; want the tick staged", len(tx.Staged), len(tx.AfterCommits), int(n.Stats().Buffered))
			}
			want := "s@" + strconv.FormatInt(tick.Unix(), 10)
			if ms := tx.Staged[0].Messages; len(ms) != 2 || ms[0].ID != want || ms[1].ID != want+"#1" {
				t.Fatalf("staged messages %+v; want ids %s and %s#1", ms, want, want)
			}
			err := spec.publish(context.Background(), n, tick)
			switch mode {
			case Require:
				if !errors.Is(err, core.ErrNoTransaction) {
					t.Fatalf("a tick of a Require queue without a transaction: %v; want ErrNoTransaction", err)
				}
			default:
				if err != nil || int(n.Stats().Buffered) == 0 {
					t.Fatalf("a tick without a transaction: %v, %d buffered; want the queue's routing (buffered)", err, int(n.Stats().Buffered))
				}
			}
		})
	}
}
