package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txmq/txmq/core"
)

// Version is the version written into every encoded batch.
const Version = 1

// Envelope is the decoded header and raw messages of a stored batch. Adapters never decode it;
// the outbox, the dead-letter store and the CLI do.
type Envelope struct {
	// Version is the envelope format version.
	Version int `json:"v"`
	// ID is the batch id.
	ID string `json:"id"`
	// Queue is the queue name.
	Queue string `json:"q"`
	// Attempt is the number of runs already spent on this batch when it was (re)written.
	Attempt int `json:"a"`
	// Created is when the batch was first encoded.
	Created time.Time `json:"t"`
	// Due is the delayed batch's due time on the publisher's clock, zero when it was due at
	// once. Backends schedule by the relative OutgoingBatch.Delay; the engine reads Due only for its
	// early-arrival guard, which allows for MaxClockSkew between the two nodes' clocks.
	Due time.Time `json:"nb,omitzero"`
	// DedupMillis is the queue's id dedup window in milliseconds when every message id of
	// the batch was given by the caller and deduplicates (txmq.QueueConfig.IDDedupWindow); 0
	// otherwise. It rides in the envelope so that the outbox's sweep asks the backend for the
	// same dedup as the flush it takes over (see core.OutgoingBatch.DedupWindow).
	DedupMillis int64 `json:"dw,omitempty"`
	// Key is the ordering key of a batch of an ordered queue (every message has it), empty
	// otherwise; see core.OutgoingBatch.Key.
	Key string `json:"k,omitempty"`
	// Priority is the batch's priority on a prioritized queue, 0 otherwise, and LeadMicros
	// its lead in microseconds (see core.OutgoingBatch.Priority and Lead): they ride in the
	// envelope so that the outbox's relay and sweep, a dead letter's replay, the ledger's
	// republisher and a drain publish the batch with the priority it was published with.
	Priority int `json:"pr,omitempty"`
	// LeadMicros is the batch's lead in microseconds; see Priority.
	LeadMicros int64 `json:"pl,omitempty"`
	// FairKey is the batch's fairness key on a fair queue (see core.OutgoingBatch.FairKey),
	// empty otherwise: it rides in the envelope as the priority does, so that every path
	// that republishes a stored batch (relay, sweep, replay, republisher, drain) keeps it.
	FairKey string `json:"fk,omitempty"`
	// Trace carries the publisher's trace context (W3C traceparent/tracestate), if any: that
	// of the first message when the batch has Traces.
	Trace map[string]string `json:"tc,omitempty"`
	// Traces, when the messages carry more than one trace context (they come from several
	// publish calls), holds each distinct one once, in order of first appearance (an empty
	// map for messages published without one), and TraceOf the index in Traces of each
	// message's. Both are empty when every message carries Trace, and in envelopes written
	// before they existed. SetTraces and KeepMessages keep them consistent.
	Traces []map[string]string `json:"tcs,omitempty"`
	// TraceOf holds, with Traces, one index into Traces per message, in order.
	TraceOf []int `json:"ti,omitempty"`
	// Headers holds each message's headers (txmq.Headers), one entry per message in order,
	// empty for a message without; nil when no message has any, and in envelopes written
	// before headers existed (see headers.go).
	Headers []map[string]string `json:"h,omitempty"`
	// Snoozes counts the times the batch's messages were snoozed (txmq.Snooze, Results.Snooze),
	// bounded by the queue's MaxSnoozes; 0 and absent for a batch never snoozed.
	Snoozes int `json:"sz,omitempty"`
	// Replays is how many times the batch was replayed from the dead letters (the replay's
	// generation): 0 and absent for a batch never replayed. A node remembers the batches it
	// dead-lettered by id and generation, so that the original coming back after a failed
	// Drop is dropped again while a replay of it runs (see internal/engine's terminalMemory).
	// Written after the header the fast decoder reads: a replayed batch decodes by
	// encoding/json.
	Replays int `json:"rp,omitempty"`
	// UniqueKey, UniqueMode and UniqueMillis are a unique batch's key, mode and window in
	// milliseconds (see core.OutgoingBatch.Unique), absent otherwise: they ride in the
	// envelope so that the outbox's relay and sweep and the ledger's republisher ask the
	// backend for the same check as the flush. Written after the header the fast decoder
	// reads: a unique batch decodes by encoding/json.
	UniqueKey    string `json:"uk,omitempty"`
	UniqueMode   int    `json:"um,omitempty"`
	UniqueMillis int64  `json:"uw,omitempty"`
	// MessageIDs holds one id per message, in order.
	MessageIDs []string `json:"ids"`
	// Messages holds the JSON messages, in order.
	Messages []json.RawMessage `json:"m"`
}

// Typed decodes the messages straight into T, so a batch is decoded exactly once. The message
// ids are only counted and kept as their raw JSON (IDList.IDs decodes them on demand), which
// saves one string per message when a listener does not ask for them.
type Typed[T any] struct {
	Header
	Messages []T `json:"m"`
}

// Header is a typed envelope's batch header: everything but the messages (encoding/json
// treats its fields as Typed's own). It is not generic, so a node's untyped code can point
// into a Typed of any T instead of copying it.
type Header struct {
	Version     int                 `json:"v"`
	ID          string              `json:"id"`
	Queue       string              `json:"q"`
	Attempt     int                 `json:"a"`
	Created     time.Time           `json:"t"`
	Due         time.Time           `json:"nb,omitzero"`
	DedupMillis int64               `json:"dw,omitempty"`
	Key         string              `json:"k,omitempty"`
	Priority    int                 `json:"pr,omitempty"`
	LeadMicros  int64               `json:"pl,omitempty"`
	FairKey     string              `json:"fk,omitempty"`
	Trace       map[string]string   `json:"tc,omitempty"`
	Traces      []map[string]string `json:"tcs,omitempty"`
	TraceOf     []int               `json:"ti,omitempty"`
	Headers     []map[string]string `json:"h,omitempty"`
	Snoozes     int                 `json:"sz,omitempty"`
	Replays     int                 `json:"rp,omitempty"`
	UniqueKey   string              `json:"uk,omitempty"`
	UniqueMode  int                 `json:"um,omitempty"`
	UniqueMilli int64               `json:"uw,omitempty"`
	MessageIDs  IDList              `json:"ids"`
}

// IDList is a JSON array of message ids as it is in the batch: its length and its raw bytes,
// decoded only when IDs is called.
type IDList struct {
	n   int
	raw []byte
}

// Len returns the number of ids.
func (l IDList) Len() int { return l.n }

// IDs decodes the ids; nil when there are none or they do not decode.
func (l IDList) IDs() []string {
	if l.n == 0 {
		return nil
	}
	if raw := string(l.raw); strings.IndexByte(raw, '\\') < 0 && utf8.ValidString(raw) {
		// No escapes (the ids NewID makes never have one): the ids are the quoted runs of one
		// copy of the array, which UnmarshalJSON checked holds only strings.
		ids := make([]string, 0, l.n)
		for i := 0; i < len(raw); i++ {
			if raw[i] != '"' {
				continue
			}
			end := strings.IndexByte(raw[i+1:], '"')
			if end < 0 {
				return nil
			}
			ids = append(ids, raw[i+1:i+1+end])
			i += end + 1
		}
		return ids
	}
	ids := make([]string, 0, l.n)
	if json.Unmarshal(l.raw, &ids) != nil {
		return nil
	}
	return ids
}

// UnmarshalJSON counts the strings of an array and keeps a copy of it; b is valid JSON
// (encoding/json checked it).
func (l *IDList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = IDList{}
		return nil
	}
	if len(b) < 2 || b[0] != '[' {
		return fmt.Errorf("message ids are %s, not an array of strings", Truncate(b, 40))
	}
	n, inString, escaped := 0, false, false
	for _, ch := range b[1 : len(b)-1] {
		switch {
		case escaped:
			escaped = false
		case inString:
			if ch == '\\' {
				escaped = true
			} else if ch == '"' {
				inString = false
			}
		case ch == '"':
			inString = true
			n++
		case ch == ',', ch == ' ', ch == '\t', ch == '\n', ch == '\r':
		default:
			return fmt.Errorf("message ids must be strings, got %s", Truncate(b, 40))
		}
	}
	*l = IDList{n: n, raw: append([]byte(nil), b...)}
	return nil
}

// Encode encodes a batch. Message bodies must already be valid, compact JSON (they are
// when they come from a publish call); they are copied verbatim, not re-validated.
func Encode(e *Envelope) []byte {
	size := 96 + len(e.ID) + len(e.Queue) + len(e.Key)
	if e.DedupMillis > 0 {
		size += 24
	}
	if !e.Due.IsZero() {
		size += 44 // ,"nb":"<RFC 3339 with nanoseconds>"
	}
	for i, m := range e.Messages {
		size += len(m) + 1
		if i < len(e.MessageIDs) {
			size += len(e.MessageIDs[i]) + 3
		}
	}
	if len(e.Traces) > 0 {
		size += 16 + 4*len(e.TraceOf) + 128*len(e.Traces) // ,"tcs":[...],"ti":[...]
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteString(`{"v":`)
	buf.WriteString(strconv.Itoa(Version))
	buf.WriteString(`,"id":`)
	writeJSONString(buf, e.ID)
	buf.WriteString(`,"q":`)
	writeJSONString(buf, e.Queue)
	buf.WriteString(`,"a":`)
	buf.WriteString(strconv.Itoa(e.Attempt))
	buf.WriteString(`,"t":"`)
	buf.Write(e.Created.UTC().AppendFormat(buf.AvailableBuffer(), time.RFC3339Nano)) // in place: no allocation
	buf.WriteByte('"')
	if !e.Due.IsZero() {
		buf.WriteString(`,"nb":"`)
		buf.Write(e.Due.UTC().AppendFormat(buf.AvailableBuffer(), time.RFC3339Nano))
		buf.WriteByte('"')
	}
	if e.DedupMillis > 0 {
		buf.WriteString(`,"dw":`)
		buf.WriteString(strconv.FormatInt(e.DedupMillis, 10))
	}
	if e.Key != "" {
		buf.WriteString(`,"k":`)
		writeJSONString(buf, e.Key)
	}
	if e.Priority != 0 {
		buf.WriteString(`,"pr":`)
		buf.WriteString(strconv.Itoa(e.Priority))
	}
	if e.LeadMicros != 0 {
		buf.WriteString(`,"pl":`)
		buf.WriteString(strconv.FormatInt(e.LeadMicros, 10))
	}
	if e.FairKey != "" {
		buf.WriteString(`,"fk":`)
		writeJSONString(buf, e.FairKey)
	}
	if len(e.Trace) > 0 {
		tc, _ := json.Marshal(e.Trace) // map[string]string cannot fail
		buf.WriteString(`,"tc":`)
		buf.Write(tc)
	}
	if len(e.Traces) > 0 {
		tcs, _ := json.Marshal(e.Traces) // []map[string]string cannot fail
		buf.WriteString(`,"tcs":`)
		buf.Write(tcs)
		buf.WriteString(`,"ti":[`)
		for i, x := range e.TraceOf {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.Itoa(x))
		}
		buf.WriteByte(']')
	}
	writeHeaders(buf, e.Headers)
	if e.Snoozes > 0 { // after the header the fast decoder reads: a snoozed batch decodes by encoding/json
		buf.WriteString(`,"sz":`)
		buf.WriteString(strconv.Itoa(e.Snoozes))
	}
	if e.Replays > 0 {
		buf.WriteString(`,"rp":`)
		buf.WriteString(strconv.Itoa(e.Replays))
	}
	if e.UniqueMode != 0 {
		buf.WriteString(`,"uk":`)
		writeJSONString(buf, e.UniqueKey)
		buf.WriteString(`,"um":`)
		buf.WriteString(strconv.Itoa(e.UniqueMode))
		if e.UniqueMillis > 0 {
			buf.WriteString(`,"uw":`)
			buf.WriteString(strconv.FormatInt(e.UniqueMillis, 10))
		}
	}
	buf.WriteString(`,"ids":[`)
	for i, id := range e.MessageIDs {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(buf, id)
	}
	buf.WriteString(`],"m":[`)
	for i, m := range e.Messages {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(m)
	}
	buf.WriteString(`]}`)
	return buf.Bytes()
}

// writeJSONString writes s as a JSON string. Ids and queue names are ASCII without quotes in
// practice; anything else goes through encoding/json.
func writeJSONString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			buf.Write(b)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

// Decode decodes a stored batch, keeping messages raw.
func Decode(body []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrUndecodable, err)
	}
	if err := e.check(len(e.Messages)); err != nil {
		return nil, err
	}
	return &e, nil
}

func (e *Envelope) check(n int) error {
	if err := checkHeader(e.Version, e.ID, e.Queue, len(e.MessageIDs), n); err != nil {
		return err
	}
	if err := checkTraces(len(e.Traces), e.TraceOf, n); err != nil {
		return err
	}
	if err := checkHeaders(len(e.Headers), n); err != nil {
		return err
	}
	return checkTimes(e.Created, e.Due)
}

func checkHeader(version int, id, queue string, ids, msgs int) error {
	switch {
	case version != Version:
		return fmt.Errorf("%w: envelope version %d, this build reads %d", core.ErrUndecodable, version, Version)
	case id == "" || queue == "":
		return fmt.Errorf("%w: envelope without batch id or queue", core.ErrUndecodable)
	case ids != msgs:
		return fmt.Errorf("%w: %d message ids for %d messages", core.ErrUndecodable, ids, msgs)
	}
	return nil
}

// checkTimes refuses envelope times that are in UTC (as Encode writes them) outside
// the years 0-9999 RFC 3339 can write, such as 9999-12-31T23:00:00-02:00: re-encoding them
// (ReencodeAttempt on a retry) would give a batch that no longer decodes. Found by fuzzing.
func checkTimes(times ...time.Time) error {
	for _, t := range times {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("%w: envelope time %s is outside the years 0-9999 in UTC", core.ErrUndecodable, t.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// DecodeTyped decodes a batch and its messages into T in one pass: by hand for a header as
// Encode writes it (see decodeTypedFast), with encoding/json for anything else.
func DecodeTyped[T any](body []byte) (*Typed[T], error) {
	e := new(Typed[T])
	if err := DecodeTypedInto(body, e, "", "", nil); err != nil {
		return nil, err
	}
	return e, nil
}

// DecodeTypedInto is DecodeTyped into *e, which it overwrites, with the caller's memory (a
// node decodes one batch per claim): when the body names queue, e.Queue is queue itself
// rather than a copy, and likewise e.ID when the body's id equals id (the backend's id of the
// batch: a hint, which may be empty); one, if not nil, may hold the message of a one-message
// batch (e.Messages is then one[:]). On error *e and *one are left in an unspecified state.
func DecodeTypedInto[T any](body []byte, e *Typed[T], queue, id string, one *[1]T) error {
	*e = Typed[T]{}
	if !decodeTypedFastInto(body, e, queue, id, one) {
		*e = Typed[T]{}
		if err := json.Unmarshal(body, e); err != nil {
			return fmt.Errorf("%w: %v", core.ErrUndecodable, err)
		}
	}
	return checkTyped(e)
}

// DecodeTypedJSON is DecodeTyped with encoding/json for the whole body: the reference the
// fast path must agree with.
func DecodeTypedJSON[T any](body []byte) (*Typed[T], error) {
	var e Typed[T]
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrUndecodable, err)
	}
	if err := checkTyped(&e); err != nil {
		return nil, err
	}
	return &e, nil
}

// checkTyped applies Decode's checks to a typed envelope.
func checkTyped[T any](e *Typed[T]) error {
	if err := checkHeader(e.Version, e.ID, e.Queue, e.MessageIDs.Len(), len(e.Messages)); err != nil {
		return err
	}
	if err := checkTraces(len(e.Traces), e.TraceOf, len(e.Messages)); err != nil {
		return err
	}
	if err := checkHeaders(len(e.Headers), len(e.Messages)); err != nil {
		return err
	}
	return checkTimes(e.Created, e.Due)
}

// ReencodeAttempt returns body with its attempt count set to attempt, or an error if body is
// not an envelope. Used by the engine on retry and by dead-letter replay (attempt 0).
func ReencodeAttempt(body []byte, attempt int) ([]byte, error) {
	e, err := Decode(body)
	if err != nil {
		return nil, err
	}
	e.Attempt = attempt
	return Encode(e), nil
}

// EncodeReplay encodes e, a decoded batch, as a dead-letter replay publishes it: attempt
// count 0 (the whole retry budget) and replay generation replays; e itself is left as it is.
func EncodeReplay(e *Envelope, replays int) []byte {
	c := *e
	c.Attempt, c.Replays = 0, replays
	return Encode(&c)
}

// Truncate returns b as a string of at most n bytes, with "..." when it was cut: for errors
// that quote a payload.
func Truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// skipFixedHeader reads past the fields every envelope starts with as Encode writes them
// (version, id, queue, attempt, created), for the readers that pick one later header field
// without decoding the body.
func (r *fastReader) skipFixedHeader() {
	r.lit(`{"v":`)
	r.integer()
	r.lit(`,"id":`)
	r.quoted()
	r.lit(`,"q":`)
	r.quoted()
	r.lit(`,"a":`)
	r.integer()
	r.lit(`,"t":`)
	r.quoted()
}
