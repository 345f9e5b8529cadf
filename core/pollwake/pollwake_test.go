package pollwake

import (
	"testing"
	"time"
)

// TestSignalAndPoll: a signal wakes the waiters of its queue only, at most one wake-up stays
// pending, and an armed waiter wakes on its own at the poll; an unregistered one no more.
func TestSignalAndPoll(t *testing.T) {
	t.Parallel()
	k := New()
	a := k.Register([]string{"q1", "q2"})
	b := k.Register([]string{"q2"})
	k.Signal("q1")
	k.Signal("q1")
	select {
	case <-a.ch:
	default:
		t.Fatal("a signal of q1 did not wake a waiter of q1")
	}
	select {
	case <-a.ch:
		t.Fatal("two signals left two wake-ups; want one pending at most")
	case <-b.ch:
		t.Fatal("a signal of q1 woke a waiter of q2 only")
	default:
	}
	select {
	case <-b.Arm(10 * time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("an armed waiter did not wake at its poll")
	}
	k.Unregister(b, []string{"q2"})
	k.Signal("q2")
	select {
	case <-b.ch:
		t.Fatal("an unregistered waiter was woken")
	default:
	}
	k.Unregister(a, []string{"q1", "q2"})
	if len(k.waiting) != 0 {
		t.Fatalf("waiting after every waiter left: %v", k.waiting)
	}
}
