package engine

import "github.com/txmq/txmq/internal/envelope"

// Links returns the distinct trace contexts of the batch's messages, in order of first
// appearance, with their message counts (what a run's span links point to).
func (d *Batch) Links() []envelope.TraceCount {
	return envelope.TraceCounts(d.Trace, d.Traces, d.TraceOf, d.Count)
}
