package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
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
	fb.PublishFn = func(ctx context.Context, b core.OutgoingBatch) error {
		if b.Key == "a" {
			once.Do(func() { // the first write of key a hangs until released
				started <- struct{}{}
				<-release
			})
		}
		return nil
	}
	reg := txmq.NewRegistry()
	n := newTestNodeOn(t, orderingFake{fb}, &txmq.NodeOptions{Registry: reg})
	txmq.MustDeclareIn(reg, "q", txmq.QueueConfig[string]{Transactional: txmq.Try, Ordered: true})
	e := engine.Of(n)
	spec := e.Spec("q")
	now := time.Now()
	take := func(key, body string) engine.Taken {
		e.BufferAdd(keyedPending(spec, key, body, time.Time{}), now)
		return e.BufferTake(now, true)
	}
	first := take("a", "a1")
	done1 := make(chan struct{})
	go func() { e.FlushTaken(context.Background(), first); close(done1) }()
	<-started
	second := take("a", "a2")
	done2 := make(chan struct{})
	go func() { e.FlushTaken(context.Background(), second); close(done2) }()
	e.FlushTaken(context.Background(), take("b", "b1")) // another key: not held up
	select {
	case <-done2:
		t.Fatal("the second flush of key a finished while the first was still writing")
	default:
	}
	close(release)
	<-done1
	<-done2
	fb.Mu.Lock()
	var got []string
	for _, b := range fb.Published {
		got = append(got, bodies(t, b))
	}
	fb.Mu.Unlock()
	if fmt.Sprint(got) != "[b:b1 a:a1 a:a2]" {
		t.Fatalf("published %v; want b:b1, then key a's flushes in the order taken", got)
	}
	if n := e.Flights(); n != 0 {
		t.Fatalf("%d flights left after every flush landed", n)
	}
}
