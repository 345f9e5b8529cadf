// Package roundrobin puts the rows a SQL adapter's claim picked into claim order: within each
// lane (a queue of the request, or a key of a fair queue) by due time minus lead, then id,
// each lane cut to its room; then round-robin across the lanes: each lane's first row in lane
// order, then each lane's second, and so on. The MySQL and SQLite adapters pick a request's
// rows with one statement of many parts and order them here, so that the order in which
// claims share a request's slots is written once.
package roundrobin

import (
	"cmp"
	"slices"
)

// Row is what Order reads of a picked row.
type Row struct {
	// Lane is the row's lane, numbered in turn order (a queue's index in the request, a fair
	// queue's key's place in the turn).
	Lane int
	// Due is when the row ranks as due within its lane: its due time minus its lead on a
	// prioritized queue, its due time otherwise (any unit, the same for every row).
	Due int64
	// ID breaks ties of Due.
	ID int64
}

// Order returns rows in claim order (see the package doc), keeping at most room(lane) rows of
// each lane, the first by (Due, ID); key reads each row's Row. rows is not changed
// (the result may be rows itself, or share its array, when it holds at most one row).
func Order[T any](rows []T, key func(*T) Row, room func(lane int) int) []T {
	switch { // a claim of one row (one message per batch) needs no sorting
	case len(rows) == 0:
		return rows
	case len(rows) == 1:
		if room(key(&rows[0]).Lane) < 1 {
			return rows[:0]
		}
		return rows
	}
	keys := make([]Row, len(rows))
	idx := make([]int, len(rows))
	for i := range rows {
		keys[i], idx[i] = key(&rows[i]), i
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := keys[a], keys[b]
		return cmp.Or(cmp.Compare(x.Lane, y.Lane), cmp.Compare(x.Due, y.Due), cmp.Compare(x.ID, y.ID))
	})
	rank := make([]int, len(rows)) // by row: its place in its lane, from 0
	kept := make([]int, 0, len(rows))
	for j, i := range idx {
		if j > 0 && keys[idx[j-1]].Lane == keys[i].Lane {
			rank[i] = rank[idx[j-1]] + 1
		}
		if rank[i] < room(keys[i].Lane) {
			kept = append(kept, i)
		}
	}
	slices.SortStableFunc(kept, func(a, b int) int { return cmp.Compare(rank[a], rank[b]) })
	out := make([]T, len(kept))
	for j, i := range kept {
		out[j] = rows[i]
	}
	return out
}
