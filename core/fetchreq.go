package core

import "time"

// DefaultLease is the lease of a FetchRequest that gives none, and of an Extend called with a
// lease of zero or less. A node always passes its own (NodeOptions.Lease).
const DefaultLease = 30 * time.Second

// DefaultFetchMax is the Max of a FetchRequest that gives none. A node always passes its own
// (NodeOptions.FetchMax).
const DefaultFetchMax = 100

// LeaseOr returns lease when it is positive, else DefaultLease: the lease an adapter's Extend
// applies.
func LeaseOr(lease time.Duration) time.Duration {
	if lease <= 0 {
		return DefaultLease
	}
	return lease
}

// Normalize returns req in the form a node sends it: Lease and Max positive (DefaultLease and
// DefaultFetchMax when not), Wait not negative, and every queue's Free concrete, between 1 and
// Max: Unlimited becomes Max, an Exclusive queue's Free is 1, a larger Free is cut to Max (and
// to the queue's cluster-wide Limit, when it has one), and a queue with no free slot (0 or a
// negative Free other than Unlimited) is left out. A request
// already in that form is returned as it is, without allocating, so an adapter's Fetch calls it
// first at no cost: hand-built requests (tests, wrapping backends) then mean what a node's do.
func (req FetchRequest) Normalize() FetchRequest {
	if req.Lease <= 0 {
		req.Lease = DefaultLease
	}
	if req.Max <= 0 {
		req.Max = DefaultFetchMax
	}
	req.Wait = max(req.Wait, 0)
	if req.normalQueues() {
		return req
	}
	qs := make([]QueueSlots, 0, len(req.Queues))
	for _, s := range req.Queues {
		switch {
		case s.Exclusive && (s.Free > 0 || s.Free == Unlimited):
			s.Free = 1
		case s.Free == Unlimited || s.Free > req.Max:
			s.Free = req.Max
		case s.Free <= 0:
			continue
		}
		if s.Limit > 0 && s.Free > s.Limit {
			s.Free = s.Limit
		}
		qs = append(qs, s)
	}
	req.Queues = qs
	return req
}

// normalQueues reports whether every queue's Free is already as Normalize leaves it.
func (req FetchRequest) normalQueues() bool {
	for _, s := range req.Queues {
		if s.Free < 1 || s.Free > req.Max || (s.Exclusive && s.Free != 1) || (s.Limit > 0 && s.Free > s.Limit) {
			return false
		}
	}
	return true
}

// Shares splits a normalised request's Max across its queues for an adapter that must fix
// each queue's number up front (one pipelined round trip, one pull per queue): share i is at
// most Queues[i].Free, the shares add up to at most Max, and Max is spread evenly, what a
// queue cannot take going to the others. When Max does not divide evenly (or is smaller than
// the number of queues), the extra claims go to the queues from index start on, in circular
// order: an adapter that varies start between calls (at random, or round-robin) starves no
// queue. A queue whose share is 0 must not be claimed from in this Fetch.
func (req FetchRequest) Shares(start int) []int {
	n := len(req.Queues)
	shares := make([]int, n)
	if n == 0 {
		return shares
	}
	start = ((start % n) + n) % n
	left := req.Max
	open := n // queues whose share is below their Free
	for left > 0 && open > 0 {
		per := left / open
		if per == 0 {
			// Fewer claims left than open queues: one more each, from start on.
			for k := 0; k < n && left > 0; k++ {
				i := (start + k) % n
				if shares[i] < req.Queues[i].Free {
					shares[i]++
					left--
				}
			}
			break
		}
		open = 0
		for i, s := range req.Queues {
			g := min(per, s.Free-shares[i])
			shares[i] += g
			left -= g
			if shares[i] < s.Free {
				open++
			}
		}
	}
	return shares
}
