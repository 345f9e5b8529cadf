package envelope

import (
	"fmt"
	"maps"

	"github.com/txmq/txmq/core"
)

// A batch coalesces the messages of several publish calls, each with its own trace context.
// The envelope keeps each message's: Trace alone when they all share one (the common case, and
// the only form envelopes had before Traces existed), otherwise Traces (each distinct context
// once) and TraceOf (one index per message), with Trace still the first message's for readers
// that know only Trace.

// TraceCount is a trace context and how many of a batch's messages carry it.
type TraceCount struct {
	// Trace is the propagated context (W3C traceparent/tracestate with the default propagator).
	Trace map[string]string
	// Messages is how many messages of the batch carry it.
	Messages int
}

// checkTraces refuses trace indices that do not name one entry of Traces per message.
func checkTraces(traces int, of []int, msgs int) error {
	if traces == 0 && len(of) == 0 {
		return nil
	}
	if len(of) != msgs {
		return fmt.Errorf("%w: %d trace indices for %d messages", core.ErrUndecodable, len(of), msgs)
	}
	for i, x := range of {
		if x < 0 || x >= traces {
			return fmt.Errorf("%w: message %d has trace index %d, the batch has %d trace contexts", core.ErrUndecodable, i, x, traces)
		}
	}
	return nil
}

// SetTraces sets the trace context of every message: message i carries traces[of[i]] (nil or
// empty: none). It keeps only the contexts in use, in order of first appearance, and writes
// Trace alone when the messages share one. len(of) must be the number of messages.
func (e *Envelope) SetTraces(traces []map[string]string, of []int) {
	e.Trace, e.Traces, e.TraceOf = normalizeTraces(traces, of)
}

// normalizeTraces returns the envelope fields for message i carrying traces[of[i]].
func normalizeTraces(traces []map[string]string, of []int) (first map[string]string, used []map[string]string, usedOf []int) {
	if len(of) == 0 {
		return nil, nil, nil
	}
	remap := make([]int, len(traces)) // index in traces -> index in used, plus one
	for _, x := range of {
		if remap[x] == 0 {
			used = append(used, traces[x])
			remap[x] = len(used)
		}
	}
	first = traces[of[0]]
	if len(first) == 0 {
		first = nil
	}
	if len(used) == 1 {
		return first, nil, nil
	}
	usedOf = make([]int, len(of))
	for i, x := range of {
		usedOf[i] = remap[x] - 1
	}
	for i, t := range used {
		if t == nil {
			used[i] = map[string]string{} // encodes as {}, which a reader takes as none
		}
	}
	return first, used, usedOf
}

// MessageTrace returns the trace context of message i (nil for none).
func (e *Envelope) MessageTrace(i int) map[string]string {
	if len(e.Traces) == 0 {
		return e.Trace
	}
	if t := e.Traces[e.TraceOf[i]]; len(t) > 0 {
		return t
	}
	return nil
}

// KeepMessages keeps the messages i (with their ids, trace contexts and headers) for which keep(i) is
// true, in order.
func (e *Envelope) KeepMessages(keep func(i int) bool) {
	ids := e.MessageIDs[:0:0]
	msgs := e.Messages[:0:0]
	var of []int
	var hs []map[string]string
	for i := range e.Messages {
		if !keep(i) {
			continue
		}
		if i < len(e.MessageIDs) {
			ids = append(ids, e.MessageIDs[i])
		}
		msgs = append(msgs, e.Messages[i])
		if len(e.Traces) > 0 {
			of = append(of, e.TraceOf[i])
		}
		if len(e.Headers) > 0 {
			hs = append(hs, e.Headers[i])
		}
	}
	e.Headers = trimHeaders(hs)
	e.MessageIDs, e.Messages = ids, msgs
	if len(e.Traces) > 0 {
		e.SetTraces(e.Traces, of)
	}
}

// TraceCounts returns the distinct trace contexts of the messages of a batch, in order of
// first appearance, with how many messages carry each; messages without one are left out.
func TraceCounts(trace map[string]string, traces []map[string]string, of []int, messages int) []TraceCount {
	if len(traces) == 0 {
		if len(trace) == 0 || messages == 0 {
			return nil
		}
		return []TraceCount{{Trace: trace, Messages: messages}}
	}
	pos := make([]int, len(traces)) // index in traces -> index in out, plus one
	var out []TraceCount
	for _, x := range of {
		if len(traces[x]) == 0 {
			continue
		}
		if pos[x] == 0 {
			out = append(out, TraceCount{Trace: traces[x]})
			pos[x] = len(out)
		}
		out[pos[x]-1].Messages++
	}
	return out
}

// SameTrace reports whether two trace contexts are equal (nil and empty are).
func SameTrace(a, b map[string]string) bool {
	return maps.Equal(a, b)
}
