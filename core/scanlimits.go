package core

import "sort"

// ScanLimits is for adapters whose claim statement scans each requested queue and then
// shares Max across them (the SQL adapters). For a normalised request it returns the queues,
// without empty names or repeats, sorted by name (so concurrent claims take per-queue locks in
// one order and cannot deadlock), and for each how many rows its scan may lock:
// min(Free, max(⌈2·Max/n⌉, 10), Max) for n queues. A single busy queue still fills Max, while
// many busy queues do not lock n·Max rows to hand out Max of them.
func (req FetchRequest) ScanLimits() ([]QueueSlots, []int) {
	qs := make([]QueueSlots, 0, len(req.Queues))
	seen := make(map[string]bool, len(req.Queues))
	for _, s := range req.Queues {
		if s.Queue == "" || seen[s.Queue] {
			continue
		}
		seen[s.Queue] = true
		qs = append(qs, s)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Queue < qs[j].Queue })
	limits := make([]int, len(qs))
	if len(qs) == 0 {
		return qs, limits
	}
	scan := min(req.Max, max((2*req.Max+len(qs)-1)/len(qs), 10))
	for i, s := range qs {
		limits[i] = min(s.Free, scan)
	}
	return qs, limits
}
