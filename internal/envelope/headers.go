package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/txmq/txmq/core"
)

// Headers are per message: a batch coalesces the messages of many publish calls, each with
// its own headers (txmq.Headers), and a publish middleware may give each message its own (a
// key id, a nonce). The envelope writes them as "h", an array of one object per message
// (an empty object for a message without headers), after the trace contexts; a batch without
// any header has no "h" at all, so its body is byte for byte what it was before headers
// existed, and envelopes written before them decode with no headers.

// checkHeaders refuses a header list that does not have one entry per message.
func checkHeaders(headers, msgs int) error {
	if headers != 0 && headers != msgs {
		return fmt.Errorf("%w: %d header entries for %d messages", core.ErrUndecodable, headers, msgs)
	}
	return nil
}

// writeHeaders writes ,"h":[...] when some message has headers.
func writeHeaders(buf *bytes.Buffer, hs []map[string]string) {
	if trimHeaders(hs) == nil {
		return
	}
	buf.WriteString(`,"h":[`)
	for i, h := range hs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if len(h) == 0 {
			buf.WriteString(`{}`)
			continue
		}
		b, _ := json.Marshal(h) // map[string]string cannot fail; keys sorted
		buf.Write(b)
	}
	buf.WriteByte(']')
}

// trimHeaders returns hs, or nil when no entry has a header.
func trimHeaders(hs []map[string]string) []map[string]string {
	for _, h := range hs {
		if len(h) > 0 {
			return hs
		}
	}
	return nil
}

// MessageHeaders returns the headers of message i, nil when it has none.
func (h *Header) MessageHeaders(i int) map[string]string { return headersAt(h.Headers, i) }

// MessageHeaders returns the headers of message i, nil when it has none.
func (e *Envelope) MessageHeaders(i int) map[string]string { return headersAt(e.Headers, i) }

func headersAt(hs []map[string]string, i int) map[string]string {
	if i < 0 || i >= len(hs) || len(hs[i]) == 0 {
		return nil
	}
	return hs[i]
}

// HeadersSize is an upper bound of the bytes headers h add to an encoded batch, for the
// batch size limits. It is small enough to inline: a message without headers costs a length
// check.
func HeadersSize(h map[string]string) int {
	if len(h) == 0 {
		return 0
	}
	return headersSize(h)
}

// headersSize is HeadersSize of non-empty headers; not inlined, so that HeadersSize is.
//
//go:noinline
func headersSize(h map[string]string) int {
	n := 3
	for k, v := range h {
		n += len(k) + len(v) + 6
		for _, s := range [2]string{k, v} {
			for i := 0; i < len(s); i++ {
				if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
					n += 5 // \u00XX
				}
			}
		}
	}
	return n
}
