package envelope

import (
	"bytes"
	"time"

	"github.com/txmq/txmq/core"
)

// Readers of one header field of an encoded batch, for the paths that republish a stored body
// (the outbox's relay and sweep, the ledger's republisher) without decoding its messages.

// DedupOf returns the id dedup of an encoded batch (its window and message ids) when its
// envelope asks for one (Envelope.DedupMillis), else zero and nil. It decodes the body only
// when the header shows the field (or is not as Encode writes it), so the batches Encode
// wrote without it cost a prefix scan.
func DedupOf(body []byte) (time.Duration, []string) {
	r := fastReader{b: body, ok: true}
	r.skipFixedHeader()
	if r.peek(`,"nb":`) {
		r.i += len(`,"nb":`)
		r.quoted()
	}
	if r.ok && !r.peek(`,"dw":`) {
		return 0, nil
	}
	// The field, or a header not as Encode writes it: decode to be sure.
	e, err := Decode(body)
	if err != nil || e.DedupMillis <= 0 {
		return 0, nil
	}
	return time.Duration(e.DedupMillis) * time.Millisecond, e.MessageIDs
}

// UniqueOf returns the unique key and mode of an encoded batch (Envelope.UniqueKey), zero for
// a batch without one or a body that is not an envelope. It scans the header (the bytes before
// the first `,"ids":[`, which no JSON string can contain unescaped) and decodes the body only
// when the header has the field.
func UniqueOf(body []byte) core.Unique {
	end := bytes.Index(body, []byte(`,"ids":[`))
	if end < 0 || !bytes.Contains(body[:end], []byte(`,"um":`)) {
		return core.Unique{}
	}
	e, err := Decode(body)
	if err != nil || e.UniqueMode == 0 {
		return core.Unique{}
	}
	return core.Unique{Key: e.UniqueKey, Mode: core.UniqueMode(e.UniqueMode), Window: time.Duration(e.UniqueMillis) * time.Millisecond}
}

// PriorityOf returns the priority and lead of an encoded batch (Envelope.Priority and
// LeadMicros), zero for a batch without them or a body that is not an envelope. It reads the
// header as Encode writes it without decoding the messages, and decodes the whole body only
// when the header is written some other way.
func PriorityOf(body []byte) (int, time.Duration) {
	r := fastReader{b: body, ok: true}
	r.skipFixedHeader()
	for _, f := range []string{`,"nb":`, `,"dw":`, `,"k":`} {
		if r.peek(f) {
			r.i += len(f)
			if f == `,"dw":` {
				r.integer()
			} else {
				r.quoted()
			}
		}
	}
	if r.ok {
		var p int
		var lead int64
		if r.peek(`,"pr":`) {
			r.i += len(`,"pr":`)
			p = r.integer()
		}
		if r.peek(`,"pl":`) {
			r.i += len(`,"pl":`)
			lead = int64(r.integer())
		}
		if r.ok {
			return p, time.Duration(lead) * time.Microsecond
		}
	}
	e, err := Decode(body)
	if err != nil {
		return 0, 0
	}
	return e.Priority, time.Duration(e.LeadMicros) * time.Microsecond
}

// FairKeyOf returns the fairness key of an encoded batch (Envelope.FairKey), empty for a
// batch without one or a body that is not an envelope. It reads the header as Encode writes
// it without decoding the messages, and decodes the whole body only when the header is
// written some other way.
func FairKeyOf(body []byte) string {
	r := fastReader{b: body, ok: true}
	r.skipFixedHeader()
	for _, f := range []string{`,"nb":`, `,"dw":`, `,"k":`, `,"pr":`, `,"pl":`} {
		if r.peek(f) {
			r.i += len(f)
			switch f {
			case `,"nb":`, `,"k":`:
				r.quoted()
			default:
				r.integer()
			}
		}
	}
	if r.ok {
		if !r.peek(`,"fk":`) {
			return ""
		}
		r.i += len(`,"fk":`)
		if k := r.str(); r.ok {
			return k
		}
	}
	e, err := Decode(body)
	if err != nil {
		return ""
	}
	return e.FairKey
}
