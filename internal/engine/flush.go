package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/txmq/txmq/core"
)

// flushConcurrency bounds parallel backend writes of one flush, unless the backend groups
// concurrent publishes (core.PublishGrouper): then up to maxFlushWriters.
const (
	flushConcurrency = 8
	maxFlushWriters  = 256
)

// flush encodes the given queue buffers into batches and stores them; a batch the backend
// refuses goes to the outbox, and only if that fails too is it dropped, logged and counted.
// Each batch gets its own ClaimTimeout from the moment its write starts (within ctx), so a
// large flush on a slow backend never times out the batches still waiting for a slot.
// fromBuffer says the queue buffers were taken from pb.buf, whose count is lowered at the end.
// A large flush is encoded and stored in parts (flushParts), one after the other.
func (pb *publisher) flush(ctx context.Context, qbs []*queueBuffer, fromBuffer bool) {
	if fromBuffer {
		total := 0
		for _, qb := range qbs {
			total += qb.messages
		}
		defer pb.buf.stored(total)
		defer pb.buf.landed(qbs)
	}
	fl := keyFlights(qbs)
	if !slices.ContainsFunc(qbs, splitsFlush) { // most flushes: one part, and no list of parts to make
		pb.flushPart(ctx, qbs, fl, nil)
		return
	}
	var scratch []core.OutgoingBatch // one part's batches, its memory reused by the next
	for _, part := range flushParts(qbs) {
		scratch = pb.flushPart(ctx, part, fl, scratch[:0])
	}
}

// flushPart encodes and stores one part of a flush (see flush); fl are the flush's flights of
// ordered keys. It appends the part's batches to all and returns it, every element zeroed
// once stored, for the next part to reuse.
func (pb *publisher) flushPart(ctx context.Context, qbs []*queueBuffer, fl map[[2]string]*flight, all []core.OutgoingBatch) []core.OutgoingBatch {
	n := pb.e
	now := n.clock.Now()
	for _, qb := range qbs {
		if qb.spec.IDWindow > 0 {
			n.stats.deduplicated.Add(int64(repeatedIDs(qb.pending)))
		}
		bs, err := appendFlushBatches(all, qb.pending, now, true)
		if err != nil {
			// Dedup failed: store the messages as they are rather than lose them.
			n.log.Error("txmq: Dedup failed; storing the messages without dedup (fix the queue's Dedup func)", "queue", qb.spec.Name, "error", err)
			bs, _ = appendFlushBatches(all, qb.pending, now, false)
		}
		all = bs
		// The envelopes hold copies of the messages: let the encoded messages go now, so a
		// large message is not held twice while it is stored.
		qb.pending = nil
	}
	if len(all) == 1 {
		if b := all[0]; b.Key != "" {
			pb.waitFlight(ctx, fl[[2]string{b.Queue, b.Key}])
		}
		pb.store(ctx, all[0], false, nil)
		all[0] = core.OutgoingBatch{}
		return all
	}
	lanes, plain := pb.splitLanes(all, orderLanes(all))
	// Writers take the lanes in order; a goroutine per batch grew a fresh stack for each one
	// (a tenth of the flush at one message per batch). A lane is one batch, or the batches of
	// one ordered key, written one after the other in publish order: once one of them is
	// handed to the outbox, the rest of the lane follows it there, so that the outbox
	// publishes them after it. flushConcurrency writers take every lane, the others (on a
	// backend that groups publishes) only the plain batches' (see splitLanes).
	// The writes' call contexts in one allocation, not one per batch (at one message per batch
	// a batch per message); each batch's write has its own element.
	calls := make([]callCtx, len(all))
	var next, nextPlain atomic.Int64
	var wg sync.WaitGroup
	for w := range min(pb.writers, len(lanes)+len(plain)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var lane []int
				if w < flushConcurrency {
					if i := next.Add(1) - 1; i < int64(len(lanes)) {
						lane = lanes[i]
					}
				}
				if lane == nil {
					i := nextPlain.Add(1) - 1
					if i >= int64(len(plain)) {
						return
					}
					lane = plain[i]
				}
				var f *flight
				if b := all[lane[0]]; b.Key != "" {
					f = fl[[2]string{b.Queue, b.Key}]
					pb.waitFlight(ctx, f)
				}
				handedOff := false
				for _, j := range lane {
					handedOff = pb.store(ctx, all[j], handedOff, &calls[j]) == storedHandedOff
					all[j] = core.OutgoingBatch{} // its body may be large: let it go once stored
				}
				pb.buf.landOne(f)
			}
		}()
	}
	wg.Wait()
	return all
}

// splitLanes returns the lanes that only the first flushConcurrency writers take, and the
// lanes of plain batches, which every writer takes: all of them in the first list, unless the
// backend groups concurrent plain publishes (core.PublishGrouper), when the lanes of one
// batch without Key, Unique or DedupWindow whose body it groups form the second list.
func (pb *publisher) splitLanes(all []core.OutgoingBatch, lanes [][]int) (other, plain [][]int) {
	if pb.writers <= flushConcurrency {
		return lanes, nil
	}
	other = lanes[:0:0]
	for _, l := range lanes {
		b := &all[l[0]]
		if len(l) == 1 && b.Key == "" && b.Unique.Mode == 0 && b.DedupWindow <= 0 && len(b.Body) <= pb.groupMaxBody {
			plain = append(plain, l)
		} else {
			other = append(other, l)
		}
	}
	return other, plain
}

// keyFlights returns the flights of the ordered keys of qbs, by {queue, key}.
func keyFlights(qbs []*queueBuffer) map[[2]string]*flight {
	var fl map[[2]string]*flight
	for _, qb := range qbs {
		for k, f := range qb.flights {
			if fl == nil {
				fl = make(map[[2]string]*flight)
			}
			fl[[2]string{qb.spec.Name, k}] = f
		}
	}
	return fl
}

// waitFlight waits until the flush of f's key before f has landed, so that a key's flushes
// reach the backend in the order they were taken; the wait is bounded by twice ClaimTimeout
// (each write of that flush is bounded by one, plus its handoff).
func (pb *publisher) waitFlight(ctx context.Context, f *flight) {
	n := pb.e
	if f == nil || f.prev == nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*n.opts.ClaimTimeout)
	defer cancel()
	f.waitPrev(wctx)
}

// orderLanes groups the indexes of batches into lanes: each unkeyed batch alone, and the
// batches of one ordered queue and key together, in their order in batches.
func orderLanes(batches []core.OutgoingBatch) [][]int {
	lanes := make([][]int, 0, len(batches))
	// The one-batch lanes share one array (a slice each, capped at its one index, so that
	// appending to a key's lane copies it): at one message per batch a lane per batch was an
	// allocation per message.
	idx := make([]int, len(batches))
	var byKey map[[2]string]int
	for i, b := range batches {
		idx[i] = i
		k := [2]string{b.Queue, b.Key}
		if b.Key == "" && b.Unique.Mode != 0 {
			// The batches of one unique key are written in publish order too, so that a
			// debounce's last publish is the one that wins.
			k[1] = "\x00unique " + b.Unique.Key
		} else if b.Key == "" {
			lanes = append(lanes, idx[i:i+1:i+1])
			continue
		}
		if byKey == nil {
			byKey = make(map[[2]string]int)
		}
		if l, ok := byKey[k]; ok {
			lanes[l] = append(lanes[l], i)
			continue
		}
		byKey[k] = len(lanes)
		lanes = append(lanes, idx[i:i+1:i+1])
	}
	return lanes
}

// flushPartBatches is about how many batches one part of a flush holds. A burst of
// publishes ahead of the flusher makes flushes of a hundred thousand batches; encoded at
// once, their batches, lanes and call contexts took tens of megabytes of memory that was
// written once and left cold (a tenth of a node's CPU at one message per batch). A part's
// fit in the CPU's cache and are reused by the next part.
const flushPartBatches = 1024

// flushParts splits the queue buffers of a flush into parts that are encoded and stored one
// after the other. A queue buffer is cut only where nothing depends on the whole flush: not on
// an ordered queue (a key's lane and flight span the flush), nor where caller ids
// deduplicate (IDWindow) or a Dedup func sees the flush's messages. It is cut between
// publishes, after at least flushPartBatches times MaxBatchMessages messages, so that a
// part's batches are full but for the last one. The other queue buffers form the first part.
func flushParts(qbs []*queueBuffer) [][]*queueBuffer {
	var parts [][]*queueBuffer
	whole := qbs[:0:0]
	for _, qb := range qbs {
		if !splitsFlush(qb) {
			whole = append(whole, qb)
			continue
		}
		per := flushPartBatches * qb.spec.MaxBatch
		pending, start, msgs := qb.pending, 0, 0
		for i, p := range pending {
			msgs += len(p.Messages)
			if msgs >= per || i == len(pending)-1 {
				parts = append(parts, []*queueBuffer{{spec: qb.spec, pending: pending[start : i+1 : i+1], messages: msgs}})
				start, msgs = i+1, 0
			}
		}
		qb.pending = nil // each part lets its own publishes go once encoded
	}
	if len(whole) > 0 {
		parts = append([][]*queueBuffer{whole}, parts...)
	}
	return parts
}

// splitsFlush reports whether flushParts cuts qb: more than a part's messages, and nothing that
// depends on the whole flush (see flushParts).
func splitsFlush(qb *queueBuffer) bool {
	return qb.messages > flushPartBatches*qb.spec.MaxBatch && !qb.spec.Ordered && qb.spec.IDWindow <= 0 && qb.spec.Dedup == nil
}
