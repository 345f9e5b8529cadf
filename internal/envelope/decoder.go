package envelope

import (
	"bytes"
	"encoding/json"
	"sync"
)

// The message of a one-message batch is decoded by a json.Decoder taken from a pool rather
// than by json.Unmarshal, which allocates its decoder state, its scanner's stack and its
// error context's field stack for every call: at one message per batch that was three
// allocations per message. A Decoder runs the same decoding code on the same bytes (it scans
// the value once to find its end, as Unmarshal scans it once to check it), so its result is
// Unmarshal's whenever it succeeds and reads all of data; otherwise the caller asks
// json.Unmarshal, whose result and error stand.

// pooledDecoderMax bounds the messages decoded by a pooled Decoder: it keeps a copy of the
// largest value it read in its buffer, and a pool must not hold on to large messages.
const pooledDecoderMax = 16 << 10

// pooledDecoder is a json.Decoder over its own reader.
type pooledDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &pooledDecoder{}
	d.dec = json.NewDecoder(&d.r)
	return d
}}

// unmarshalPooled decodes data, one JSON value without surrounding whitespace, into v and
// reports whether that worked and read all of data. When it reports false, v may be partly
// written and the caller decides with json.Unmarshal.
func unmarshalPooled(data []byte, v any) bool {
	if len(data) > pooledDecoderMax {
		return false
	}
	d := decoders.Get().(*pooledDecoder)
	d.r.Reset(data)
	start := d.dec.InputOffset()
	if err := d.dec.Decode(v); err != nil || d.dec.InputOffset()-start != int64(len(data)) {
		// The decoder may hold an error or unread bytes: it is not reused.
		return false
	}
	d.r.Reset(nil)
	decoders.Put(d)
	return true
}
