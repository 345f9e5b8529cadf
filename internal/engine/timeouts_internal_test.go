package engine

import (
	"strings"
	"testing"
)

// stuckForStackTest blocks until release is closed: a goroutine whose stack is looked up.
func stuckForStackTest(ids chan<- uint64, release <-chan struct{}) {
	ids <- goroutineID()
	<-release
}

func TestGoroutineStackFindsAnotherGoroutine(t *testing.T) {
	t.Parallel()
	ids, release := make(chan uint64), make(chan struct{})
	defer close(release)
	go stuckForStackTest(ids, release)
	id := <-ids
	if id == 0 {
		t.Fatal("goroutineID returned 0")
	}
	st := goroutineStack(id)
	if !strings.Contains(st, "stuckForStackTest") {
		t.Fatalf("goroutineStack(%d) = %q; want the stuck goroutine's stack", id, st)
	}
	if strings.Contains(st, "TestGoroutineStackFindsAnotherGoroutine(") {
		t.Errorf("goroutineStack(%d) holds the test goroutine's frames too: %q", id, st)
	}
	if st := goroutineStack(0); !strings.Contains(st, "unknown") {
		t.Errorf("goroutineStack(0) = %q; want a note that the id is unknown", st)
	}
}
