package txmq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestFlushesOfOneKeyInOrder: two flushes of one ordered key that overlap (the first is still
// writing when the next tick takes what came after) reach the backend in the order they were
// taken; a flush of another key does not wait. And a transaction's takeKey waits for the
// key's flight and takes what is left of the key in the buffer.
func TestFlushesOfOneKeyInOrder(t *testing.T) {
	t.Parallel()
	fb := &fakeBackend{}
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	var once sync.Once
	fb.publishFn = func(ctx context.Context, b core.OutgoingBatch) error {
		if b.Key == "a" {
			once.Do(func() { // the first write of key a hangs until released
				started <- struct{}{}
				<-release
			})
		}
		return nil
	}
	reg := NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &NodeOptions{Registry: reg})
	spec := MustDeclareIn(reg, "q", QueueConfig[string]{Transactional: Try, Ordered: true}).spec
	now := time.Now()
	take := func(key, body string) []*queueBuffer {
		n.buf.add(keyedPending(spec, key, body, time.Time{}), now)
		return n.buf.take(now, true)
	}
	first := take("a", "a1")
	done1 := make(chan struct{})
	go func() { n.flush(context.Background(), first, true); close(done1) }()
	<-started
	second := take("a", "a2")
	done2 := make(chan struct{})
	go func() { n.flush(context.Background(), second, true); close(done2) }()
	n.flush(context.Background(), take("b", "b1"), true) // another key: not held up
	select {
	case <-done2:
		t.Fatal("the second flush of key a finished while the first was still writing")
	default:
	}
	close(release)
	<-done1
	<-done2
	fb.mu.Lock()
	var got []string
	for _, b := range fb.published {
		got = append(got, bodies(t, b))
	}
	fb.mu.Unlock()
	if fmt.Sprint(got) != "[b:b1 a:a1 a:a2]" {
		t.Fatalf("published %v; want b:b1, then key a's flushes in the order taken", got)
	}
	if n := len(n.buf.flights.latest); n != 0 {
		t.Fatalf("%d flights left after every flush landed", n)
	}
}

// TestTakeKeyWaitsForFlight: takeKey waits for the key's flight to land, then takes the key's
// publishes left in the buffer (only that key's).
func TestTakeKeyWaitsForFlight(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := newBuffer(time.Hour, time.Hour, nil)
	spec := &queueSpec{name: "q", maxBatch: 100, ordered: true}
	b.add(keyedPending(spec, "a", "a1", time.Time{}), now)
	flying := b.take(now, true)
	b.add(keyedPending(spec, "a", "a2", time.Time{}), now)
	b.add(keyedPending(spec, "b", "b1", time.Time{}), now)
	got := make(chan *queueBuffer)
	go func() { got <- b.takeKey(context.Background(), spec, "a") }()
	select {
	case <-got:
		t.Fatal("takeKey returned while the key's flight had not landed")
	case <-time.After(20 * time.Millisecond):
	}
	b.landed(flying)
	qb := <-got
	if qb == nil || len(qb.pending) != 1 || qb.pending[0].Key != "a" || qb.messages != 1 {
		t.Fatalf("takeKey took %+v; want key a's one publish", qb)
	}
	rest := b.take(now, true)
	if len(rest) != 1 || len(rest[0].pending) != 1 || rest[0].pending[0].Key != "b" || rest[0].messages != 1 {
		t.Fatalf("left in the buffer %+v; want key b's publish", rest)
	}
	if b.takeKey(context.Background(), spec, "c") != nil {
		t.Fatal("takeKey of a key with nothing buffered returned publishes")
	}
}
