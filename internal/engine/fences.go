package engine

import (
	"container/heap"
	"sync"
	"time"
)

// fenceSet holds a node's running claims ordered by fence time, with one timer for the whole
// node instead of one per claim: a claim that runs for a moment (most of them) costs a heap
// push and remove under one lock, not a timer to arm and stop. The timer is armed at the
// earliest fence it knows of; a claim that finishes before its fence leaves the timer where it
// is (it then fires early, finds nothing due, and re-arms at the new earliest fence), so the
// timer is reset only when a claim's fence is earlier than the armed time.
//
// mu guards every running's fenceAt, lost flag writes, done and index, and the heap.
type fenceSet struct {
	mu      sync.Mutex
	h       fenceHeap
	members int         // claims registered and not yet removed by their worker (fenced ones too)
	timer   *time.Timer // fires fire; nil until the first claim
	armed   time.Time   // when timer fires; zero when it is not armed
	fire    func()      // the timer's func (fenceSet.expire bound to its node)
}

// fenceHeap is a min-heap of running claims by fenceAt; each running keeps its index.
type fenceHeap []*running

func (h fenceHeap) Len() int           { return len(h) }
func (h fenceHeap) Less(i, j int) bool { return h[i].fenceAt.Before(h[j].fenceAt) }
func (h fenceHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

// Push appends x (a *running); use heap.Push.
func (h *fenceHeap) Push(x any) {
	r := x.(*running)
	r.idx = len(*h)
	*h = append(*h, r)
}

// Pop removes the last element; use heap.Pop.
func (h *fenceHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.idx = -1
	return r
}

// addLocked registers r with its fence at r.fenceAt and arms the timer if r's fence is the
// earliest.
func (s *fenceSet) addLocked(r *running) {
	s.members++
	heap.Push(&s.h, r)
	s.armLocked(r.fenceAt)
}

// armLocked makes sure the timer fires no later than at.
func (s *fenceSet) armLocked(at time.Time) {
	if !s.armed.IsZero() && !at.Before(s.armed) {
		return
	}
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.fire)
		return
	}
	s.timer.Reset(time.Until(at))
}

// removeLocked takes r out of the heap (if a fence did not already) and the members.
func (s *fenceSet) removeLocked(r *running) {
	s.dropLocked(r)
	s.members--
}

// dropLocked takes r out of the heap, if it is there: its claim is lost, or its worker done.
func (s *fenceSet) dropLocked(r *running) {
	if r.idx >= 0 {
		heap.Remove(&s.h, r.idx)
	}
}

// movedLocked re-sorts r after its fence moved (a confirmed extension).
func (s *fenceSet) movedLocked(r *running) {
	if r.idx >= 0 {
		heap.Fix(&s.h, r.idx)
		s.armLocked(r.fenceAt)
	}
}

// expireLocked takes out every claim whose fence has passed, marks it lost and returns it, and
// re-arms the timer at the next fence.
func (s *fenceSet) expireLocked(now time.Time) []*running {
	var out []*running
	for len(s.h) > 0 && !now.Before(s.h[0].fenceAt) {
		r := heap.Pop(&s.h).(*running)
		if !r.done && !r.lost.Load() {
			r.lost.Store(true)
			out = append(out, r)
		}
	}
	s.armed = time.Time{}
	if len(s.h) > 0 {
		s.armLocked(s.h[0].fenceAt)
	}
	return out
}

// snapshot returns the claims not fenced yet.
func (s *fenceSet) snapshot() []*running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*running(nil), s.h...)
}

// count returns how many claims are registered (fenced or not) and not yet removed.
func (s *fenceSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members
}
