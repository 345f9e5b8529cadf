package memory

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTimeHeap checks the heap against a sorted model under random push, pop, remove and fix.
func TestTimeHeap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Unix(0, 0)
	var h timeHeap
	var model []*record
	for step := range 5000 {
		switch op := rng.IntN(4); {
		case op == 0 || len(model) == 0:
			r := &record{at: base.Add(time.Duration(rng.IntN(1000)))}
			h.push(r)
			model = append(model, r)
		case op == 1:
			r := h.pop()
			if earliest := slices.MinFunc(model, cmpAt); !r.at.Equal(earliest.at) {
				t.Fatalf("step %d: pop returned %v, earliest is %v", step, r.at, earliest.at)
			}
			model = slices.DeleteFunc(model, func(m *record) bool { return m == r })
		case op == 2:
			r := model[rng.IntN(len(model))]
			if got := h.remove(r.idx); got != r {
				t.Fatalf("step %d: remove(idx) returned another record", step)
			}
			model = slices.DeleteFunc(model, func(m *record) bool { return m == r })
		default:
			r := model[rng.IntN(len(model))]
			r.at = base.Add(time.Duration(rng.IntN(1000)))
			h.fix(r.idx)
		}
		if h.Len() != len(model) {
			t.Fatalf("step %d: heap has %d, model %d", step, h.Len(), len(model))
		}
		for i, r := range h.items {
			if r.idx != i {
				t.Fatalf("step %d: record at %d says idx %d", step, i, r.idx)
			}
			if i > 0 && h.less(i, (i-1)/2) {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
	}
}

func cmpAt(a, b *record) int { return a.at.Compare(b.at) }
