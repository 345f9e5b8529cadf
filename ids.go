package txmq

import (
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// setIDs replaces the generated ids of encoded with ids (see IDs), after checking them.
func setIDs(queue string, encoded []core.Message, ids []string) error {
	if len(ids) != len(encoded) {
		return fmt.Errorf("%w: queue %q: IDs gave %d ids for %d messages; give one id per message, in order", core.ErrInvalidConfig, queue, len(ids), len(encoded))
	}
	seen := make(map[string]struct{}, len(ids))
	for i, id := range ids {
		if err := checkID(id); err != nil {
			return fmt.Errorf("%w: queue %q, message %d: id %q %v", core.ErrInvalidConfig, queue, i, truncateID(id), err)
		}
		if _, dup := seen[id]; dup {
			return fmt.Errorf("%w: queue %q: id %q is given twice in one call; the ids of a call must be distinct", core.ErrInvalidConfig, queue, truncateID(id))
		}
		seen[id] = struct{}{}
		encoded[i].ID = id
	}
	return nil
}

// checkID says what is wrong with a caller's message id, or nil.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("is empty; use 1 to %d bytes", MaxIDBytes)
	case len(id) > MaxIDBytes:
		return fmt.Errorf("is %d bytes; use at most %d", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("holds a control character (%U)", r)
		}
	}
	return nil
}

// truncateID shortens an id for an error message.
func truncateID(id string) string {
	if len(id) > 40 {
		return id[:40] + "..."
	}
	return id
}

// MessageIDs returns the ids of the messages a listener received with ctx, in the order of its
// slice: the generated ids (sortable by publish time) or those given with ID/IDs. They are the
// same in every run of the batch, after a handoff to the outbox, a drain and a dead letter's
// replay. It returns nil when ctx is not a listener's.
func MessageIDs(ctx context.Context) []string {
	return engine.MessageIDs(ctx)
}

// LeaseDeadline returns the time at which the node will fence the batch whose listener
// received ctx, that is the confirmed lease end minus LeaseMargin, and true; false if ctx is not
// a listener's context. The node extends the lease while the listener runs, so the value moves
// forward with every confirmed extension; once it passes without one, ctx is cancelled with
// cause ErrLeaseLost. Long work can compare its own estimate against it, and must stop when
// ctx is done. (The deadline is not ctx.Deadline: a context deadline cannot move forward, and
// would end with DeadlineExceeded instead of ErrLeaseLost.)
func LeaseDeadline(ctx context.Context) (time.Time, bool) { return engine.LeaseDeadline(ctx) }
