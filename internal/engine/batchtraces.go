package engine

import (
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
)

// A flush coalesces publish calls made under different trace contexts into one batch; the
// envelope keeps each message's (envelope.Envelope.SetTraces), so that the consumer span can
// link every producer span (see Tracer.StartRun). Batches whose publishes share a context (or
// have none) take none of this: the group keeps its first publish's context alone.

// batchTraces are the trace contexts of the messages of a group: first alone when they share
// it (of nil), otherwise message i carries list[of[i]].
type batchTraces struct {
	first map[string]string
	list  []map[string]string
	of    []int
}

// traceTable collects the distinct trace contexts of a group's messages, in order.
type traceTable struct {
	list  []map[string]string
	index map[string]int // traceKey -> index in list
	of    []int          // one per message
}

// add records that the next n messages carry trace.
func (t *traceTable) add(trace map[string]string, n int) {
	if t.index == nil {
		t.index = make(map[string]int)
	}
	k := traceKey(trace)
	x, ok := t.index[k]
	if !ok {
		x = len(t.list)
		t.list = append(t.list, trace)
		t.index[k] = x
	}
	for range n {
		t.of = append(t.of, x)
	}
}

// after returns the trace indices of out, what the queue's Dedup made of in (whose indices
// are t.of): a message keeps its context by id; one that Dedup made anew carries the first
// message's.
func (t *traceTable) after(in, out []core.Message) []int {
	byID := make(map[string]int, len(in))
	for i, m := range in {
		if _, dup := byID[m.ID]; !dup {
			byID[m.ID] = t.of[i]
		}
	}
	of := make([]int, len(out))
	for i, m := range out {
		x, ok := byID[m.ID]
		if !ok && len(t.of) > 0 {
			x = t.of[0]
		}
		of[i] = x
	}
	return of
}

// traceKey is a string equal for equal trace contexts.
func traceKey(trace map[string]string) string {
	if len(trace) == 1 {
		for k, v := range trace {
			return k + "\x00" + v
		}
	}
	keys := make([]string, 0, len(trace))
	for k := range trace {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(trace[k])
		b.WriteByte(0)
	}
	return b.String()
}
