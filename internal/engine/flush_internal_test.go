package engine

import (
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestFlushParts: a large flush is cut into parts between publishes, after at least
// flushPartBatches full batches of messages, only where nothing depends on the whole flush;
// every publish is in exactly one part, in order.
func TestFlushParts(t *testing.T) {
	t.Parallel()
	per := flushPartBatches // messages per part at MaxBatchMessages 1
	dedup := func(m []core.Message) ([]core.Message, error) { return m, nil }
	tests := []struct {
		name  string
		spec  Spec
		pubs  []int // messages per publish
		parts []int // publishes per part; the uncut queue buffers form the first part
	}{
		{name: "small flush is one part", spec: Spec{MaxBatch: 1}, pubs: repeat(1, per), parts: []int{per}},
		{name: "cut after each part's batches", spec: Spec{MaxBatch: 1}, pubs: repeat(1, 2*per+3), parts: []int{per, per, 3}},
		{name: "part holds whole batches", spec: Spec{MaxBatch: 10}, pubs: repeat(1, 10*per+1), parts: []int{10 * per, 1}},
		{name: "cut between publishes only", spec: Spec{MaxBatch: 1}, pubs: append(repeat(1, per-1), 5, 1), parts: []int{per, 1}},
		{name: "ordered queue is not cut", spec: Spec{MaxBatch: 1, Ordered: true}, pubs: repeat(1, 3*per), parts: []int{3 * per}},
		{name: "caller-id window is not cut", spec: Spec{MaxBatch: 1, IDWindow: time.Minute}, pubs: repeat(1, 3*per), parts: []int{3 * per}},
		{name: "Dedup func is not cut", spec: Spec{MaxBatch: 1, Dedup: dedup}, pubs: repeat(1, 3*per), parts: []int{3 * per}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			qb := &queueBuffer{spec: &tt.spec}
			for i, n := range tt.pubs {
				qb.pending = append(qb.pending, &core.Pending{Queue: "q", Messages: make([]core.Message, n), Key: string(rune('a' + i%3))})
				qb.messages += n
			}
			all := qb.pending
			parts := flushParts([]*queueBuffer{qb})
			if len(parts) != len(tt.parts) {
				t.Fatalf("%d parts, want %d", len(parts), len(tt.parts))
			}
			next := 0
			for i, part := range parts {
				if len(part) != 1 {
					t.Fatalf("part %d holds %d queue buffers, want 1", i, len(part))
				}
				got := part[0]
				if len(got.pending) != tt.parts[i] {
					t.Fatalf("part %d holds %d publishes, want %d", i, len(got.pending), tt.parts[i])
				}
				msgs := 0
				for j, p := range got.pending {
					if p != all[next+j] {
						t.Fatalf("part %d publish %d is not publish %d of the flush", i, j, next+j)
					}
					msgs += len(p.Messages)
				}
				if got.messages != msgs || got.spec != &tt.spec {
					t.Fatalf("part %d counts %d messages of spec %p, want %d of %p", i, got.messages, got.spec, msgs, &tt.spec)
				}
				next += len(got.pending)
			}
			if next != len(all) {
				t.Fatalf("parts hold %d publishes, want %d", next, len(all))
			}
		})
	}
}

// TestFlushPartsKeepsUncutFirst: the queue buffers that are not cut form the first part, whole,
// and a cut one's parts follow.
func TestFlushPartsKeepsUncutFirst(t *testing.T) {
	t.Parallel()
	big := &queueBuffer{spec: &Spec{Name: "big", MaxBatch: 1}}
	for range flushPartBatches + 1 {
		big.pending = append(big.pending, &core.Pending{Queue: "big", Messages: make([]core.Message, 1)})
		big.messages++
	}
	small := &queueBuffer{spec: &Spec{Name: "small", MaxBatch: 1}, pending: []*core.Pending{{Queue: "small", Messages: make([]core.Message, 1)}}, messages: 1}
	ordered := &queueBuffer{spec: &Spec{Name: "ordered", MaxBatch: 1, Ordered: true}, pending: big.pending, messages: big.messages}
	parts := flushParts([]*queueBuffer{big, small, ordered})
	if len(parts) != 3 || len(parts[0]) != 2 || parts[0][0] != small || parts[0][1] != ordered {
		t.Fatalf("parts %v: want [small ordered] first, then big's two parts", parts)
	}
	if parts[1][0].spec.Name != "big" || parts[2][0].spec.Name != "big" || len(parts[2][0].pending) != 1 {
		t.Fatalf("big's parts: %v and %v", parts[1][0], parts[2][0])
	}
	if big.pending != nil {
		t.Fatal("the cut queue buffer still holds its publishes: they are each part's now")
	}
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}
