package parity

import (
	"runtime"
	"testing"
)

// TestSlotsHeavyFirst: with the only slot taken, a light caller waiting before a heavy one
// still gets the slot after it.
func TestSlotsHeavyFirst(t *testing.T) {
	t.Parallel()
	s := newSlots(1)
	s.acquire(false)
	got := make(chan string, 2)
	waitFor := func(n int) {
		for {
			s.mu.Lock()
			w := s.waiting
			s.mu.Unlock()
			if w == n {
				return
			}
			runtime.Gosched()
		}
	}
	go func() { s.acquire(false); got <- "light"; s.release() }()
	waitFor(1)
	go func() { s.acquire(true); got <- "heavy"; s.release() }()
	waitFor(2)
	s.release()
	if first, second := <-got, <-got; first != "heavy" || second != "light" {
		t.Fatalf("slots went to %s, then %s; want the heavy caller first", first, second)
	}
}

// TestSlotsBound: n callers hold n slots; the next waits until one is released.
func TestSlotsBound(t *testing.T) {
	t.Parallel()
	s := newSlots(3)
	for range 3 {
		s.acquire(false)
	}
	done := make(chan struct{})
	go func() { s.acquire(true); close(done) }()
	for {
		s.mu.Lock()
		w := s.waiting
		s.mu.Unlock()
		if w == 1 {
			break
		}
		runtime.Gosched()
	}
	select {
	case <-done:
		t.Fatal("a fourth caller got one of three slots while all were held")
	default:
	}
	s.release()
	<-done
}
