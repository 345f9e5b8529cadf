package sqlite

import (
	"context"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestClusterLimitClaims: a queue with a Limit is claimed at most Limit at once across
// Backends on the file (each as another process would open one), a plain queue in the same
// request is not held back, and an Ack gives its slot back. (A lease that runs out gives its
// slot back too: parity limits/released_*.)
func TestClusterLimitClaims(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.backend(nil), w.backend(nil)
	publishN(t, a, "lim", 6)
	publishN(t, a, "plain", 3)
	limited := func(free int) core.QueueSlots { return core.QueueSlots{Queue: "lim", Free: free, Limit: 2} }
	first := fetch(t, a, 0, limited(1))
	if len(first) != 1 {
		t.Fatalf("first claim = %d batches; want 1", len(first))
	}
	second := fetch(t, b, 0, limited(2), all("plain"))
	if countQueue(second, "lim") != 1 || countQueue(second, "plain") != 3 {
		t.Fatalf("second claim, from another backend = %d of lim, %d of plain; want 1 (the room the limit leaves) and 3", countQueue(second, "lim"), countQueue(second, "plain"))
	}
	if got := fetch(t, b, 0, limited(2)); len(got) != 0 {
		t.Fatalf("claim at the limit = %d batches; want 0", len(got))
	}
	if err := a.Ack(context.Background(), first[0]); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if got := fetch(t, b, 0, limited(2)); len(got) != 1 {
		t.Fatalf("claim after an ack = %d batches; want 1", len(got))
	}
}

// countQueue counts the claims of queue.
func countQueue(cs []*core.Claim, queue string) int {
	n := 0
	for _, c := range cs {
		if c.Queue == queue {
			n++
		}
	}
	return n
}
