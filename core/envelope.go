package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// EnvelopeVersion is the version written into every encoded batch.
const EnvelopeVersion = 1

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
	// once. Backends schedule by the relative OutgoingBatch.Delay; core reads Due only for its
	// early-arrival guard, which allows for MaxClockSkew between the two nodes' clocks.
	Due time.Time `json:"nb,omitzero"`
	// Trace carries the publisher's trace context (W3C traceparent/tracestate), if any.
	Trace map[string]string `json:"tc,omitempty"`
	// MessageIDs holds one id per message, in order.
	MessageIDs []string `json:"ids"`
	// Messages holds the JSON messages, in order.
	Messages []json.RawMessage `json:"m"`
}

// typedEnvelope decodes the messages straight into T, so a batch is decoded exactly once. The
// message ids are only counted (listeners do not see them), which saves one string per message.
type typedEnvelope[T any] struct {
	Version    int               `json:"v"`
	ID         string            `json:"id"`
	Queue      string            `json:"q"`
	Attempt    int               `json:"a"`
	Created    time.Time         `json:"t"`
	Due        time.Time         `json:"nb,omitzero"`
	Trace      map[string]string `json:"tc,omitempty"`
	MessageIDs idCount           `json:"ids"`
	Messages   []T               `json:"m"`
}

// idCount decodes a JSON array of strings into the number of its elements, allocating nothing.
type idCount int

// UnmarshalJSON counts the strings of an array; b is valid JSON (encoding/json checked it).
func (c *idCount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = 0
		return nil
	}
	if len(b) < 2 || b[0] != '[' {
		return fmt.Errorf("message ids are %s, not an array of strings", truncate(b, 40))
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
			return fmt.Errorf("message ids must be strings, got %s", truncate(b, 40))
		}
	}
	*c = idCount(n)
	return nil
}

// Message is one encoded message of a publish call.
type Message struct {
	// ID is the message id, assigned at publish.
	ID string
	// Body is the message's JSON.
	Body json.RawMessage

	// value is the message before encoding, kept only for a queue's Dedup func.
	value any
}

// EncodeEnvelope encodes a batch. Message bodies must already be valid, compact JSON (they are
// when they come from a publish call); they are copied verbatim, not re-validated.
func EncodeEnvelope(e *Envelope) []byte {
	size := 96 + len(e.ID) + len(e.Queue)
	if !e.Due.IsZero() {
		size += 44 // ,"nb":"<RFC 3339 with nanoseconds>"
	}
	for i, m := range e.Messages {
		size += len(m) + 1
		if i < len(e.MessageIDs) {
			size += len(e.MessageIDs[i]) + 3
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteString(`{"v":`)
	buf.WriteString(strconv.Itoa(EnvelopeVersion))
	buf.WriteString(`,"id":`)
	writeJSONString(buf, e.ID)
	buf.WriteString(`,"q":`)
	writeJSONString(buf, e.Queue)
	buf.WriteString(`,"a":`)
	buf.WriteString(strconv.Itoa(e.Attempt))
	buf.WriteString(`,"t":"`)
	buf.Write(e.Created.UTC().AppendFormat(nil, time.RFC3339Nano))
	buf.WriteByte('"')
	if !e.Due.IsZero() {
		buf.WriteString(`,"nb":"`)
		buf.Write(e.Due.UTC().AppendFormat(nil, time.RFC3339Nano))
		buf.WriteByte('"')
	}
	if len(e.Trace) > 0 {
		tc, _ := json.Marshal(e.Trace) // map[string]string cannot fail
		buf.WriteString(`,"tc":`)
		buf.Write(tc)
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

// DecodeEnvelope decodes a stored batch, keeping messages raw.
func DecodeEnvelope(body []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
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
	return checkTimes(e.Created, e.Due)
}

func checkHeader(version int, id, queue string, ids, msgs int) error {
	switch {
	case version != EnvelopeVersion:
		return fmt.Errorf("%w: envelope version %d, this build reads %d", ErrUndecodable, version, EnvelopeVersion)
	case id == "" || queue == "":
		return fmt.Errorf("%w: envelope without batch id or queue", ErrUndecodable)
	case ids != msgs:
		return fmt.Errorf("%w: %d message ids for %d messages", ErrUndecodable, ids, msgs)
	}
	return nil
}

// checkTimes refuses envelope times that are in UTC (as EncodeEnvelope writes them) outside
// the years 0-9999 RFC 3339 can write, such as 9999-12-31T23:00:00-02:00: re-encoding them
// (ReencodeAttempt on a retry) would give a batch that no longer decodes. Found by fuzzing.
func checkTimes(times ...time.Time) error {
	for _, t := range times {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("%w: envelope time %s is outside the years 0-9999 in UTC", ErrUndecodable, t.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// decodeTyped decodes a batch and its messages into T in one pass: by hand for a header as
// EncodeEnvelope writes it (see decodeTypedFast), with encoding/json for anything else.
func decodeTyped[T any](body []byte) (*typedEnvelope[T], error) {
	e, ok := decodeTypedFast[T](body)
	if !ok {
		return decodeTypedJSON[T](body)
	}
	if err := checkTyped(e); err != nil {
		return nil, err
	}
	return e, nil
}

// decodeTypedJSON is decodeTyped with encoding/json for the whole body: the reference the
// fast path must agree with.
func decodeTypedJSON[T any](body []byte) (*typedEnvelope[T], error) {
	var e typedEnvelope[T]
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if err := checkTyped(&e); err != nil {
		return nil, err
	}
	return &e, nil
}

// checkTyped applies DecodeEnvelope's checks to a typed envelope.
func checkTyped[T any](e *typedEnvelope[T]) error {
	if err := checkHeader(e.Version, e.ID, e.Queue, int(e.MessageIDs), len(e.Messages)); err != nil {
		return err
	}
	return checkTimes(e.Created, e.Due)
}

// ReencodeAttempt returns body with its attempt count set to attempt, or an error if body is
// not an envelope. Used by core on retry and by dead-letter replay (attempt 0).
func ReencodeAttempt(body []byte, attempt int) ([]byte, error) {
	e, err := DecodeEnvelope(body)
	if err != nil {
		return nil, err
	}
	e.Attempt = attempt
	return EncodeEnvelope(e), nil
}
