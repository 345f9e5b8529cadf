package outboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// Msg is the suites' message: a number.
type Msg struct {
	N int `json:"n"`
}

// ErrPlain is a publish failure that is not an outage.
var ErrPlain = errors.New("backend said no")

// Backend is a core.Backend that records what is published to it; its other methods do
// nothing. The zero value is ready to use.
type Backend struct {
	mu      sync.Mutex
	batches []core.OutgoingBatch
	fail    error
}

// SetFail makes Publish return err (nil: succeed again).
func (b *Backend) SetFail(err error) { b.mu.Lock(); b.fail = err; b.mu.Unlock() }

// Publish records ob, or returns the failure SetFail set.
func (b *Backend) Publish(_ context.Context, ob core.OutgoingBatch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	b.batches = append(b.batches, ob)
	return nil
}

// Messages returns the numbers of the messages published to queue, in publish order.
func (b *Backend) Messages(t testing.TB, queue string) []int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, ob := range b.batches {
		if ob.Queue != queue {
			continue
		}
		env, err := envelope.Decode(ob.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range env.Messages {
			var v Msg
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.N)
		}
	}
	return out
}

// Fetch returns nothing.
func (b *Backend) Fetch(context.Context, core.FetchRequest) ([]*core.Claim, error) {
	return nil, nil
}

// Ack does nothing.
func (b *Backend) Ack(context.Context, *core.Claim) error { return nil }

// Retry does nothing.
func (b *Backend) Retry(context.Context, *core.Claim, []byte, time.Duration) error {
	return nil
}

// Drop does nothing.
func (b *Backend) Drop(context.Context, *core.Claim, string) error { return nil }

// Extend does nothing.
func (b *Backend) Extend(context.Context, *core.Claim, time.Duration) error { return nil }

// Depths returns nothing.
func (b *Backend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, nil
}

// Close does nothing.
func (b *Backend) Close() error { return nil }

// Batch makes a one-message batch of queue with ordering key key, the message numbered n.
func Batch(queue, key string, n int) core.OutgoingBatch {
	id := core.NewID()
	return core.OutgoingBatch{ID: id, Queue: queue, Key: key, Body: envelope.Encode(&envelope.Envelope{
		ID: id, Queue: queue, Key: key, Created: time.Now(), MessageIDs: []string{core.NewID()},
		Messages: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))},
	})}
}
