package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestWriteTurnSharedInProcess: the Backends of one process on one file queue for it in one
// first-come-first-served turn (not each at the lock file, which wakes its waiters in no set
// order), and a Backend's Close gives the shared turn back, so the others go on writing.
func TestWriteTurnSharedInProcess(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	if a.writes != b.writes {
		t.Fatal("two Backends on one file have write turns of their own: they would meet at the lock file, which is not first come, first served")
	}
	other := newWorld(t).backend(nil)
	if other.writes == a.writes {
		t.Fatal("Backends on two files share a write turn")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- b.Publish(ctx, core.OutgoingBatch{ID: "after-close", Queue: "turn", Body: []byte(`{}`), Messages: 1})
	}()
	if err := <-done; err != nil {
		t.Fatalf("a publish on a Backend whose sibling on the file closed: %v (the closed Backend kept the shared write turn)", err)
	}
	if got := fetch(t, b, time.Minute, core.QueueSlots{Queue: "turn", Free: 1}); len(got) != 1 {
		t.Fatalf("claimed %d batches, want 1", len(got))
	}
	turns.mu.Lock()
	refs := turns.m[w.path].refs
	turns.mu.Unlock()
	if refs != 1 {
		t.Fatalf("the file's turn counts %d Backends after one of two closed, want 1", refs)
	}
}
