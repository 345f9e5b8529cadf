package memory

// timeHeap is a min-heap of records ordered by record.at, keeping record.idx current so a
// record can be removed or re-keyed in O(log n). It backs both the delayed set (keyed by due
// time) and the in-flight set (keyed by lease end); a record is in at most one heap at a time.
type timeHeap struct {
	items []*record
	// byLead keys the heap by record.at minus record.lead (the ready records of a
	// prioritized queue: see queue.rank).
	byLead bool
}

func (h *timeHeap) Len() int { return len(h.items) }

// peek returns the earliest record; the heap must not be empty.
func (h *timeHeap) peek() *record { return h.items[0] }

func (h *timeHeap) push(r *record) {
	r.idx = len(h.items)
	h.items = append(h.items, r)
	h.up(r.idx)
}

// pop removes and returns the earliest record; the heap must not be empty.
func (h *timeHeap) pop() *record { return h.remove(0) }

// remove removes and returns the record at index i.
func (h *timeHeap) remove(i int) *record {
	last := len(h.items) - 1
	r := h.items[i]
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.fix(i)
	}
	r.idx = -1
	return r
}

// fix restores the heap order after the key of the record at index i changed.
func (h *timeHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *timeHeap) less(i, j int) bool {
	if h.byLead {
		return h.items[i].at.Add(-h.items[i].lead).Before(h.items[j].at.Add(-h.items[j].lead))
	}
	return h.items[i].at.Before(h.items[j].at)
}

func (h *timeHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}

func (h *timeHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts the record at i toward the leaves and reports whether it moved.
func (h *timeHeap) down(i int) bool {
	start, n := i, len(h.items)
	for {
		left := 2*i + 1
		if left >= n {
			break
		}
		child := left
		if right := left + 1; right < n && h.less(right, left) {
			child = right
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}
