package txmqtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/txmq/txmq/core"
)

// Duplicate wraps b so that every published batch is stored twice: the same body under the
// batch's id and again under a new id. Every message is then delivered at least twice, each
// copy with its own retry budget, as can happen with any at-least-once backend; use it to
// prove listeners idempotent. Everything else passes through to b.
func Duplicate(b core.Backend) core.Backend { return &duplicate{Backend: b} }

type duplicate struct{ core.Backend }

func (d *duplicate) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := d.Backend.Publish(ctx, b); err != nil {
		return err
	}
	c := b
	c.ID = core.NewID()
	return d.Backend.Publish(ctx, c)
}

// Unwrap returns the wrapped backend.
func (d *duplicate) Unwrap() core.Backend { return d.Backend }

// DeadLetterRecorder is a core.DeadLetterSink that keeps every dead letter in memory. Its
// zero value is ready to use; set Fail to make it refuse (to test ReasonDeadLetterFailed). Like
// the outbox's store, it keeps the first dead letter of a batch (same queue and non-empty batch
// id) and answers a second one with core.ErrAlreadyDeadLettered.
type DeadLetterRecorder struct {
	mu      sync.Mutex
	letters []core.DeadLetter
	// Fail, if set, is returned by DeadLetter instead of recording.
	Fail error
}

var _ core.DeadLetterSink = (*DeadLetterRecorder)(nil)

// DeadLetter records dl.
func (r *DeadLetterRecorder) DeadLetter(ctx context.Context, dl *core.DeadLetter) error {
	if dl == nil {
		return errors.New("txmqtest: nil dead letter")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		return r.Fail
	}
	if dl.BatchID != "" {
		for _, l := range r.letters {
			if l.Queue == dl.Queue && l.BatchID == dl.BatchID {
				return fmt.Errorf("txmqtest: queue %q batch %s (first reason %s): %w", dl.Queue, dl.BatchID, l.Reason, core.ErrAlreadyDeadLettered)
			}
		}
	}
	c := *dl
	c.Body = append([]byte(nil), dl.Body...)
	r.letters = append(r.letters, c)
	return nil
}

// Letters returns the recorded dead letters, oldest first.
func (r *DeadLetterRecorder) Letters() []core.DeadLetter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.DeadLetter(nil), r.letters...)
}

// Count returns how many dead letters of queue were recorded (all queues if queue is "").
func (r *DeadLetterRecorder) Count(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.letters {
		if queue == "" || l.Queue == queue {
			n++
		}
	}
	return n
}
