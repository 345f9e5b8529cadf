package engine

import (
	"encoding/json"
	"fmt"
	"slices"
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

// isUnique reports whether p's messages carry unique keys (core.Message.Unique): the app API
// gives every message of such a call one.
func isUnique(p *core.Pending) bool { return len(p.Messages) > 0 && p.Messages[0].Unique != "" }

// meta returns the engine's data of p, or nil when p was not made by a node.
func meta(p *core.Pending) *pendingMeta {
	m, _ := p.Batcher.(*pendingMeta)
	return m
}

// dueKey identifies a due time exactly (time.Time is not a safe map key).
type dueKey struct {
	sec   int64
	nsec  int
	dedup bool   // the group's messages deduplicate by id (kept apart from the others)
	prio  int    // the group's priority (a prioritized queue's publishes of each are apart)
	fair  string // the group's fairness key (a fair queue's publishes of each are apart)
}

// batches cuts ps, the Pendings of one queue (all made by a node: see meta), into encoded
// batches, in three steps:
//
//  1. group (grouper): each publish joins a group by exact due time, priority and fairness key; on an ordered queue by
//     key in publish order, a key's publishes starting a new group whenever its due time
//     changes; apart when its messages deduplicate by caller id;
//  2. fill: each group's messages (and, when its publishes carry different trace contexts,
//     each message's context) are gathered in publish order, in one allocation per group;
//  3. cut (group.cut): the repeats of a caller id within the flush are left out, the queue's
//     Dedup applied when dedup is set, and appendBatches cuts what is left by
//     MaxBatchMessages and the lowest batch size limit of the group's publishes.
//
// Each batch keeps the trace context of each of its messages, and its Delay is the group's
// due time minus the publishing node's clock now (now itself when the Pending carries no
// clock).
func batches(ps []*core.Pending, now time.Time, dedup bool) ([]core.OutgoingBatch, error) {
	return appendFlushBatches(nil, ps, now, dedup)
}

// appendFlushBatches is batches appending to out, which it grows once for the batches
// MaxBatchMessages makes (a flush reuses one slice across its parts).
func appendFlushBatches(out []core.OutgoingBatch, ps []*core.Pending, now time.Time, dedup bool) ([]core.OutgoingBatch, error) {
	if len(ps) == 0 {
		return out, nil
	}
	m0 := meta(ps[0])
	if m0 == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by a node", core.ErrInvalidConfig, ps[0].Queue)
	}
	spec := m0.spec
	// First pass: find each publish's group and count the messages, so that each group's
	// slice is allocated once. Most flushes have a single group.
	gr := grouper{ordered: spec.Ordered}
	of := make([]int, len(ps))
	for i, p := range ps {
		m := meta(p)
		if m == nil || m.spec != spec {
			return nil, fmt.Errorf("%w: Batches got queues %q and %q together; call it per queue", core.ErrInvalidConfig, spec.Name, p.Queue)
		}
		g := gr.find(p, m)
		gr.groups[g].count(p, m)
		of[i] = g
	}
	// Second pass: gather the messages.
	for i, p := range ps {
		gr.groups[of[i]].take(p)
	}
	// Room for the batches MaxBatchMessages makes (a size limit may cut more): growing a slice
	// of many small batches by appending was a tenth of a node's CPU at one message per batch.
	want := 0
	for i := range gr.groups {
		want += (gr.groups[i].n + spec.MaxBatch - 1) / spec.MaxBatch
	}
	out = slices.Grow(out, want)
	var seen map[string]struct{} // the caller ids met so far, across the groups
	for i := range gr.groups {
		var err error
		if out, err = gr.groups[i].cut(out, spec, now, dedup, &seen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// group is the messages of a flush that are stored alike: same due time (and ordering key,
// and caller-id dedup), in publish order.
type group struct {
	due      time.Time
	clock    Clock
	trace    map[string]string // the first publish's trace context
	mixed    bool              // some publish has another (see traceTable)
	traces   traceTable        // with mixed: each message's trace context
	n        int               // its messages
	msgs     []core.Message
	maxBytes int    // the lowest batch size limit of its publishes; 0: none
	key      string // the ordering key of an ordered queue's group
	prio     int    // the priority of its publishes (core.Pending.Priority)
	fair     string // the fairness key of its publishes (core.Pending.FairKey)
	dedup    bool   // its messages have caller ids that deduplicate (IDDedupWindow)
	single   bool   // one message per batch (a backend that deduplicates whole batches)
	unique   bool   // its publish has unique keys (core.Message.Unique): one message per batch
}

// grouper finds the group of each publish of a flush (batches' first step).
type grouper struct {
	ordered bool
	groups  []group
	// index finds a group by due time once there is more than one (until then the last
	// group is the only candidate, and no map is made).
	index map[dueKey]int
	// lastOf is, on an ordered queue, the index of each key's latest group: a key's
	// publishes join it while their due time is the same, and start a new group (after it,
	// so in publish order) when it changes, so that no message overtakes an earlier one of
	// its key.
	lastOf map[string]int
}

// find returns the index of p's group, adding one when p starts a new group.
func (gr *grouper) find(p *core.Pending, m *pendingMeta) int {
	dd := m.dedupIDs()
	if isUnique(p) { // a group of its own, never joined: each message is a batch
		g := gr.add(p, m, dd, p.Key)
		gr.groups[g].unique, gr.groups[g].single = true, true
		if gr.ordered {
			if gr.lastOf == nil {
				gr.lastOf = make(map[string]int)
			}
			gr.lastOf[p.Key] = g
		}
		return g
	}
	if gr.ordered {
		if g, ok := gr.lastOf[p.Key]; ok && gr.groups[g].due.Equal(p.NotBefore) && gr.groups[g].dedup == dd && gr.groups[g].prio == p.Priority && gr.groups[g].fair == p.FairKey {
			return g
		}
		if gr.lastOf == nil {
			gr.lastOf = make(map[string]int)
		}
		g := gr.add(p, m, dd, p.Key)
		gr.lastOf[p.Key] = g
		return g
	}
	last := len(gr.groups) - 1
	switch {
	case last < 0:
		return gr.add(p, m, dd, "")
	case !gr.groups[last].unique && gr.groups[last].due.Equal(p.NotBefore) && gr.groups[last].dedup == dd && gr.groups[last].prio == p.Priority && gr.groups[last].fair == p.FairKey:
		return last
	}
	if gr.index == nil { // a second group key: until now there was one group (and unique ones)
		gr.index = make(map[dueKey]int)
		for i := range gr.groups {
			if g := &gr.groups[i]; !g.unique {
				gr.index[dueKey{g.due.Unix(), g.due.Nanosecond(), g.dedup, g.prio, g.fair}] = i
			}
		}
	}
	k := dueKey{p.NotBefore.Unix(), p.NotBefore.Nanosecond(), dd, p.Priority, p.FairKey}
	if g, ok := gr.index[k]; ok {
		return g
	}
	g := gr.add(p, m, dd, "")
	gr.index[k] = g
	return g
}

// add starts a group with p's due time, clock and trace context, and returns its index.
func (gr *grouper) add(p *core.Pending, m *pendingMeta, dedup bool, key string) int {
	gr.groups = append(gr.groups, group{due: p.NotBefore, clock: m.clock, trace: p.Trace, key: key, prio: p.Priority, fair: p.FairKey, dedup: dedup, single: dedup && m.onePerBatch})
	return len(gr.groups) - 1
}

// count adds p to g's sizes: its messages, whether its trace context differs from the
// group's first, and its batch size limit.
func (g *group) count(p *core.Pending, m *pendingMeta) {
	if !g.mixed && g.n > 0 && !envelope.SameTrace(g.trace, p.Trace) {
		g.mixed = true
	}
	g.n += len(p.Messages)
	if l := int(m.maxBatchBytes); l > 0 && (g.maxBytes == 0 || l < g.maxBytes) {
		g.maxBytes = l
	}
}

// take appends p's messages (and, in a mixed group, their trace context) to g.
func (g *group) take(p *core.Pending) {
	if g.msgs == nil {
		g.msgs = make([]core.Message, 0, g.n)
	}
	g.msgs = append(g.msgs, p.Messages...)
	if g.mixed {
		g.traces.add(p.Trace, len(p.Messages))
	}
}

// cut appends g's batches to out: its messages without the caller ids already in *seen
// (which it adds to, made on first use), through the queue's Dedup when dedup is set, each
// kept message with its trace context, cut by appendBatches.
func (g *group) cut(out []core.OutgoingBatch, spec *Spec, now time.Time, dedup bool, seen *map[string]struct{}) ([]core.OutgoingBatch, error) {
	msgs := g.msgs
	tr := batchTraces{first: g.trace}
	if g.mixed {
		tr.list, tr.of = g.traces.list, g.traces.of
	}
	filtered := false
	if g.dedup {
		if *seen == nil {
			*seen = make(map[string]struct{}, g.n)
		}
		msgs = firstOfEachID(msgs, *seen)
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
	var window time.Duration
	if g.dedup {
		window = spec.IDWindow
	}
	return appendBatches(out, spec, msgs, g.due, g.delay(now), tr, g.key, g.prio, g.fair, now, g.maxBytes, window, g.single || g.unique), nil
}

// delay is what is left of g's due time by the publishing node's clock (now when the group
// has no clock); 0 when it has no due time.
func (g *group) delay(now time.Time) time.Duration {
	if g.due.IsZero() {
		return 0
	}
	if g.clock != nil {
		now = g.clock.Now()
	}
	return g.due.Sub(now)
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

// oneMessageLists is the id list and the body list of a one-message batch, allocated together.
type oneMessageLists struct {
	ids    [1]string
	bodies [1]json.RawMessage
}

// appendBatches slices msgs by the queue's MaxBatchMessages and encodes each slice. due is the
// publisher's due time and delay what is left of it by the publisher's clock; a batch whose
// delay is not positive is due now (zero NotBefore and Delay, no due time in the envelope).
// When maxBytes > 0, slices are also cut so that each encoded batch stays within maxBytes (at
// least one message per batch). key is the ordering key of an ordered queue's batches, prio
// their priority (its lead from the queue's PriorityAging), fair their fairness key; tr the
// trace contexts of msgs. window > 0 makes the batches deduplicate their (caller) ids for
// that long, one message per batch when single is set.
func appendBatches(out []core.OutgoingBatch, spec *Spec, msgs []core.Message, due time.Time, delay time.Duration, tr batchTraces, key string, prio int, fair string, now time.Time, maxBytes int, window time.Duration, single bool) []core.OutgoingBatch {
	if delay <= 0 {
		due, delay = time.Time{}, 0
	}
	var seen []bool // with mixed traces and a size limit: the contexts counted in this batch
	// The batch ids' time: one wall clock read for the call, not one per batch (at one
	// message per batch, NewID's clock read was a quarter of the node's time.Now cost).
	idAt := time.Now()
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
			if fair != "" {
				size += len(fair) + 8
			}
			for i := range n {
				size += len(msgs[i].Body) + len(msgs[i].ID) + perMessageOverhead + envelope.HeadersSize(msgs[i].Headers)
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
		env := &envelope.Envelope{ID: core.NewIDAt(idAt), Queue: spec.Name, Created: now, Due: due, Trace: tr.first, Key: key, FairKey: fair}
		if n == 1 { // its id list and body list in one allocation, not two
			l := new(oneMessageLists)
			env.MessageIDs, env.Messages = l.ids[:], l.bodies[:0]
		} else {
			env.MessageIDs, env.Messages = make([]string, n), make([]json.RawMessage, 0, n)
		}
		if tr.of != nil {
			env.SetTraces(tr.list, tr.of[:n])
			tr.of = tr.of[n:]
		}
		for i, m := range chunk {
			env.MessageIDs[i] = m.ID
			env.Messages = append(env.Messages, m.Body)
			if m.Headers != nil && env.Headers == nil {
				env.Headers = make([]map[string]string, n)
			}
			if env.Headers != nil {
				env.Headers[i] = m.Headers
			}
		}
		b := core.OutgoingBatch{ID: env.ID, Queue: spec.Name, Delay: delay, NotBefore: due, Exclusive: spec.Exclusive, Messages: n, Key: key, FairKey: fair, MessageIDs: env.MessageIDs}
		if lead := core.PriorityLead(prio, spec.PriorityAging); prio != 0 || lead > 0 {
			env.Priority, env.LeadMicros = prio, lead.Microseconds()
			b.Priority, b.Lead = prio, lead
		}
		if window > 0 {
			env.DedupMillis = max(window.Milliseconds(), 1)
			b.DedupWindow, b.DedupIDs = window, env.MessageIDs
		}
		if n == 1 && chunk[0].Unique != "" && spec.Unique.Mode != 0 {
			b.Unique = core.Unique{Key: chunk[0].Unique, Mode: spec.Unique.Mode, Window: spec.Unique.Window}
			env.UniqueKey, env.UniqueMode, env.UniqueMillis = b.Unique.Key, int(b.Unique.Mode), b.Unique.Window.Milliseconds()
		}
		b.Body, b.BodyFixed = envelope.Encode(env), true // a new buffer nothing writes to again
		out = append(out, b)
	}
	return out
}
