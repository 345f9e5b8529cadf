package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// pendingMeta is the engine's core.Batcher of a Pending it made: the queue's settings, the
// publishing node's clock (on which NotBefore was computed) and the batch size limit in force
// when the call was published (0: none).
type pendingMeta struct {
	spec  *Spec
	clock Clock
	// maxBatchBytes is an int32 (batch limits are far below 2 GiB, and a larger one is
	// capped) so that with the three flags the struct stays in the 32-byte size class: one is
	// allocated per publish call.
	maxBatchBytes int32
	// callerIDs: the call's messages have ids given with ID/IDs, which deduplicate when the
	// queue has an IDDedupWindow (see dedupIDs).
	callerIDs bool
	// onePerBatch: the node's backend deduplicates whole batches (core.DedupSupport), so
	// each deduplicating message gets a batch of its own.
	onePerBatch bool
	// tick: the call publishes a schedule's tick inside the tick's claim (see
	// Queue.Schedule): it is staged in the claim's transaction whatever the queue's routing.
	tick bool
}

// dedupIDs reports whether the call's messages deduplicate by id.
func (m *pendingMeta) dedupIDs() bool { return m.callerIDs && m.spec.IDWindow > 0 }

// Batches implements core.Batcher: the queue's Dedup, then batches (see core.Batches).
func (m *pendingMeta) Batches(ps []*core.Pending, now time.Time) ([]core.OutgoingBatch, error) {
	return batches(ps, now, true)
}

// meta returns the engine's data of p, or nil when p was not made by a node.
func meta(p *core.Pending) *pendingMeta {
	m, _ := p.Batcher.(*pendingMeta)
	return m
}

// dueKey identifies a due time exactly (time.Time is not a safe map key).
type dueKey struct {
	sec   int64
	nsec  int
	dedup bool // the group's messages deduplicate by id (kept apart from the others)
}

// batches cuts ps, the Pendings of one queue (all made by a node: see meta), into encoded
// batches. It groups the messages by exact due time (and, on an ordered queue, by key in
// publish order, a key's publishes starting a new group whenever its due time changes; and
// apart when they deduplicate by caller id), drops the repeats of a caller id within the
// flush, applies the queue's Dedup when dedup is set, and then lets appendBatches cut each
// group by MaxBatchMessages and the lowest batch size limit of its publishes. Each batch keeps
// the trace context of each of its messages, and its Delay is the group's due time minus the
// publishing node's clock now (now itself when the Pending carries no clock).
func batches(ps []*core.Pending, now time.Time, dedup bool) ([]core.OutgoingBatch, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	m0 := meta(ps[0])
	if m0 == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by a node", core.ErrInvalidConfig, ps[0].Queue)
	}
	spec := m0.spec
	type group struct {
		due      time.Time
		clock    Clock
		trace    map[string]string // the first publish's trace context
		mixed    bool              // some publish has another (see traceTable)
		traces   traceTable        // with mixed: each message's trace context
		count    int
		msgs     []core.Message
		maxBytes int    // the lowest batch size limit of its publishes; 0: none
		key      string // the ordering key of an ordered queue's group
		dedup    bool   // its messages have caller ids that deduplicate (IDDedupWindow)
		single   bool   // one message per batch (a backend that deduplicates whole batches)
	}
	// First pass: find each publish's group (by exact due time) and count the messages, so
	// that each group's slice is allocated once. Most flushes have a single group.
	var (
		groups []group
		index  map[dueKey]int
		of     = make([]int, len(ps))
	)
	// lastOf is, on an ordered queue, the index of each key's latest group: a key's publishes
	// join it while their due time is the same, and start a new group (after it, so in publish
	// order) when it changes, so that no message overtakes an earlier one of its key.
	var lastOf map[string]int
	if spec.Ordered {
		lastOf = make(map[string]int)
	}
	for i, p := range ps {
		m := meta(p)
		if m == nil || m.spec != spec {
			return nil, fmt.Errorf("%w: Batches got queues %q and %q together; call it per queue", core.ErrInvalidConfig, spec.Name, p.Queue)
		}
		g := len(groups) - 1
		dd := m.dedupIDs()
		switch {
		case lastOf != nil:
			var ok bool
			if g, ok = lastOf[p.Key]; !ok || !groups[g].due.Equal(p.NotBefore) || groups[g].dedup != dd {
				g = len(groups)
				lastOf[p.Key] = g
				groups = append(groups, group{due: p.NotBefore, clock: m.clock, trace: p.Trace, key: p.Key, dedup: dd, single: dd && m.onePerBatch})
			}
		case g >= 0 && groups[g].due.Equal(p.NotBefore) && groups[g].dedup == dd:
		case g < 0:
			groups = append(groups, group{due: p.NotBefore, clock: m.clock, trace: p.Trace, dedup: dd, single: dd && m.onePerBatch})
			g = 0
		default:
			if index == nil { // a second group key: until now there was one group
				index = map[dueKey]int{{groups[0].due.Unix(), groups[0].due.Nanosecond(), groups[0].dedup}: 0}
			}
			k := dueKey{p.NotBefore.Unix(), p.NotBefore.Nanosecond(), dd}
			var ok bool
			if g, ok = index[k]; !ok {
				g = len(groups)
				index[k] = g
				groups = append(groups, group{due: p.NotBefore, clock: m.clock, trace: p.Trace, dedup: dd, single: dd && m.onePerBatch})
			}
		}
		of[i] = g
		if !groups[g].mixed && groups[g].count > 0 && !envelope.SameTrace(groups[g].trace, p.Trace) {
			groups[g].mixed = true
		}
		groups[g].count += len(p.Messages)
		if l := int(m.maxBatchBytes); l > 0 && (groups[g].maxBytes == 0 || l < groups[g].maxBytes) {
			groups[g].maxBytes = l
		}
	}
	for i, p := range ps {
		g := &groups[of[i]]
		if g.msgs == nil {
			g.msgs = make([]core.Message, 0, g.count)
		}
		g.msgs = append(g.msgs, p.Messages...)
		if g.mixed {
			g.traces.add(p.Trace, len(p.Messages))
		}
	}
	// Room for the batches MaxBatchMessages makes (a size limit may cut more): growing a slice
	// of many small batches by appending was a tenth of a node's CPU at one message per batch.
	want := 0
	for _, g := range groups {
		want += (g.count + spec.MaxBatch - 1) / spec.MaxBatch
	}
	out := make([]core.OutgoingBatch, 0, want)
	var seen map[string]struct{} // the caller ids met so far, across the groups
	for _, g := range groups {
		msgs := g.msgs
		tr := batchTraces{first: g.trace}
		if g.mixed {
			tr.list, tr.of = g.traces.list, g.traces.of
		}
		filtered := false
		if g.dedup {
			if seen == nil {
				seen = make(map[string]struct{}, g.count)
			}
			msgs = firstOfEachID(msgs, seen)
			filtered = true
		}
		if dedup && spec.Dedup != nil {
			var err error
			if msgs, err = spec.Dedup(msgs); err != nil {
				return nil, err
			}
			filtered = true
		}
		if filtered && g.mixed { // each kept message keeps its own trace context
			tr.of = g.traces.after(g.msgs, msgs)
		}
		var delay time.Duration
		if !g.due.IsZero() {
			pubNow := now
			if g.clock != nil {
				pubNow = g.clock.Now()
			}
			delay = g.due.Sub(pubNow)
		}
		var window time.Duration
		if g.dedup {
			window = spec.IDWindow
		}
		out = appendBatches(out, spec, msgs, g.due, delay, tr, g.key, now, g.maxBytes, window, g.single)
	}
	return out, nil
}

// firstOfEachID keeps the messages whose id is not in seen yet, adding their ids: publishes of
// one id that meet in one flush are deduplicated here (the first wins, whatever its due time),
// before the backend is asked.
func firstOfEachID(msgs []core.Message, seen map[string]struct{}) []core.Message {
	out := make([]core.Message, 0, len(msgs))
	for _, m := range msgs {
		if _, dup := seen[m.ID]; dup {
			continue
		}
		seen[m.ID] = struct{}{}
		out = append(out, m)
	}
	return out
}

// appendBatches slices msgs by the queue's MaxBatchMessages and encodes each slice. due is the
// publisher's due time and delay what is left of it by the publisher's clock; a batch whose
// delay is not positive is due now (zero NotBefore and Delay, no due time in the envelope).
// When maxBytes > 0, slices are also cut so that each encoded batch stays within maxBytes (at
// least one message per batch). key is the ordering key of an ordered queue's batches; tr the
// trace contexts of msgs. window > 0 makes the batches deduplicate their (caller) ids for
// that long, one message per batch when single is set.
func appendBatches(out []core.OutgoingBatch, spec *Spec, msgs []core.Message, due time.Time, delay time.Duration, tr batchTraces, key string, now time.Time, maxBytes int, window time.Duration, single bool) []core.OutgoingBatch {
	if delay <= 0 {
		due, delay = time.Time{}, 0
	}
	var seen []bool // with mixed traces and a size limit: the contexts counted in this batch
	for len(msgs) > 0 {
		n := min(len(msgs), spec.MaxBatch)
		if single {
			n = 1
		}
		if maxBytes > 0 {
			first := tr.first
			if tr.of != nil {
				first = tr.list[tr.of[0]]
				seen = make([]bool, len(tr.list))
			}
			size := envelopeOverhead(spec.Name, first) + len(key) + 8
			for i := range n {
				size += len(msgs[i].Body) + len(msgs[i].ID) + perMessageOverhead
				if tr.of != nil { // its index, and its context the first time
					size += 8
					if x := tr.of[i]; !seen[x] {
						seen[x] = true
						size += envelopeOverhead("", tr.list[x]) - envelopeFixed + 8
					}
				}
				if i > 0 && size > maxBytes {
					n = i
					break
				}
			}
		}
		chunk := msgs[:n]
		msgs = msgs[n:]
		env := &envelope.Envelope{ID: core.NewID(), Queue: spec.Name, Created: now, Due: due, Trace: tr.first, Key: key,
			MessageIDs: make([]string, n), Messages: make([]json.RawMessage, 0, n)}
		if tr.of != nil {
			env.SetTraces(tr.list, tr.of[:n])
			tr.of = tr.of[n:]
		}
		for i, m := range chunk {
			env.MessageIDs[i] = m.ID
			env.Messages = append(env.Messages, m.Body)
		}
		b := core.OutgoingBatch{ID: env.ID, Queue: spec.Name, Delay: delay, NotBefore: due, Exclusive: spec.Exclusive, Messages: n, Key: key, MessageIDs: env.MessageIDs}
		if window > 0 {
			env.DedupMillis = max(window.Milliseconds(), 1)
			b.DedupWindow, b.DedupIDs = window, env.MessageIDs
		}
		b.Body = envelope.Encode(env)
		out = append(out, b)
	}
	return out
}
