package outbox

import (
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// Which after-commit rows skip the lease: RunInTx rows of unordered queues without a delay,
// young enough that the sweep cannot take them before the page's work ends.
func TestMayPublishUnleased(t *testing.T) {
	t.Parallel()
	now := time.Now()
	defaults := &Store{o: Options{RecoveryAge: DefaultRecoveryAge, PublishTimeout: DefaultPublishTimeout}}
	short := &Store{o: Options{RecoveryAge: time.Second, PublishTimeout: DefaultPublishTimeout}}
	plain := core.OutgoingBatch{Queue: "orders", ID: "b1"}
	keyed, delayed, due := plain, plain, plain
	keyed.Key = "k"
	delayed.Delay = time.Second
	due.NotBefore = now.Add(time.Second)
	tests := []struct {
		name string
		s    *Store
		r    row
		want bool
	}{
		{"fresh RunInTx row", defaults, row{batch: plain, began: now}, true},
		{"transaction began 14 s ago", defaults, row{batch: plain, began: now.Add(-14 * time.Second)}, true},
		{"transaction began 15 s ago", defaults, row{batch: plain, began: now.Add(-15 * time.Second)}, false},
		{"not a RunInTx row", defaults, row{batch: plain}, false},
		{"ordering key", defaults, row{batch: keyed, began: now}, false},
		{"delay", defaults, row{batch: delayed, began: now}, false},
		{"due time", defaults, row{batch: due, began: now}, false},
		{"recovery age shorter than a page's work", short, row{batch: plain, began: now}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.s.mayPublishUnleased(tt.r, now); got != tt.want {
				t.Errorf("mayPublishUnleased = %v, want %v", got, tt.want)
			}
		})
	}
}
