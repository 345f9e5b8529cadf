package envelope

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// The fast path of DecodeTyped reads the header exactly as Encode writes it, by hand,
// and leaves only the message array to encoding/json. At one message per batch the header is
// most of the bytes, and decoding it through reflection (field lookup by name, time.Time's
// unmarshaler, the validity pre-scan of the whole body) was about half of a node's CPU.
//
// The rule that keeps it safe: the fast path either returns exactly what encoding/json would
// have returned, or gives up (ok false), and DecodeTyped then runs encoding/json on the whole
// body, so every error (and every odd but valid body: other key orders, escapes, whitespace,
// duplicate or unknown keys) is encoding/json's own. It only accepts:
//
//	{"v":INT,"id":STR,"q":STR,"a":INT,"t":TIME[,"nb":TIME][,"dw":INT][,"k":STR][,"pr":INT][,"pl":INT][,"fk":STR]
//	 [,"tc":{...}][,"tcs":[{...},...]]
//	 [,"ti":[INT,...]],"ids":[STR,...],"m":[...]}
//
// with no whitespace, where STR holds printable ASCII without '"' or '\', INT is an int without
// leading zeros, TIME is a string time.Time's own UnmarshalJSON accepts (the method encoding/json
// calls), the objects hold STR values only, and the tc object, the tcs array and the m array
// are handed to encoding/json as they are.

// fastReader walks a body left to right; any mismatch clears ok and later calls do nothing.
type fastReader struct {
	b  []byte
	i  int
	ok bool
}

// lit consumes s if the body continues with it.
func (r *fastReader) lit(s string) {
	if r.ok && len(r.b)-r.i >= len(s) && string(r.b[r.i:r.i+len(s)]) == s {
		r.i += len(s)
		return
	}
	r.ok = false
}

// peek reports whether the body continues with s, consuming nothing.
func (r *fastReader) peek(s string) bool {
	return r.ok && len(r.b)-r.i >= len(s) && string(r.b[r.i:r.i+len(s)]) == s
}

// quoted returns the next JSON string, quotes included, if it is plain printable ASCII.
func (r *fastReader) quoted() []byte {
	if !r.ok || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.ok = false
		return nil
	}
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s := r.b[r.i : j+1]
			r.i = j + 1
			return s
		case c < 0x20 || c >= 0x7f || c == '\\':
			r.ok = false
			return nil
		}
	}
	r.ok = false
	return nil
}

// str returns the next plain JSON string's contents.
func (r *fastReader) str() string {
	q := r.quoted()
	if !r.ok {
		return ""
	}
	return string(q[1 : len(q)-1])
}

// strAs is str, returning known itself when the contents equal it (no copy).
func (r *fastReader) strAs(known string) string {
	q := r.quoted()
	if !r.ok {
		return ""
	}
	if q = q[1 : len(q)-1]; known != "" && string(q) == known {
		return known
	}
	return string(q)
}

// integer returns the next JSON integer if it fits an int, has no leading zero and is not -0.
func (r *fastReader) integer() int {
	if !r.ok {
		return 0
	}
	j := r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	start := j
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	digits := r.b[start:j]
	if len(digits) == 0 || (digits[0] == '0' && (len(digits) > 1 || start > r.i)) {
		r.ok = false
		return 0
	}
	n, err := strconv.Atoi(string(r.b[r.i:j]))
	if err != nil {
		r.ok = false
		return 0
	}
	r.i = j
	return n
}

// time returns the next JSON string decoded by time.Time's UnmarshalJSON.
func (r *fastReader) time() time.Time {
	var t time.Time
	q := r.quoted()
	if r.ok && t.UnmarshalJSON(q) != nil {
		r.ok = false
	}
	return t
}

// stringObject returns the next JSON object if it holds only plain strings, for encoding/json
// to decode (a trace context); anything else gives up.
func (r *fastReader) stringObject() []byte {
	start := r.i
	r.lit("{")
	if r.peek("}") {
		r.i++
		return r.b[start:r.i]
	}
	for r.ok {
		r.quoted()
		r.lit(":")
		r.quoted()
		if r.peek("}") {
			r.i++
			return r.b[start:r.i]
		}
		r.lit(",")
	}
	return nil
}

// objectArray returns the next JSON array of objects of plain strings, for encoding/json to
// decode (the trace contexts of a batch); anything else gives up.
func (r *fastReader) objectArray() []byte {
	start := r.i
	r.lit("[")
	if r.peek("]") {
		r.i++
		return r.b[start:r.i]
	}
	for r.ok {
		r.stringObject()
		if r.peek("]") {
			r.i++
			return r.b[start:r.i]
		}
		r.lit(",")
	}
	return nil
}

// intArray returns the next JSON array of integers (as integer reads them), non-nil when empty
// as encoding/json makes it.
func (r *fastReader) intArray() []int {
	r.lit("[")
	out := []int{}
	if r.peek("]") {
		r.i++
		return out
	}
	for r.ok {
		out = append(out, r.integer())
		if r.peek("]") {
			r.i++
			return out
		}
		r.lit(",")
	}
	return nil
}

// idCount counts the next JSON array of plain strings.
func (r *fastReader) idCount() int {
	r.lit("[")
	if r.peek("]") {
		r.i++
		return 0
	}
	n := 0
	for r.ok {
		r.quoted()
		n++
		if r.peek("]") {
			r.i++
			return n
		}
		r.lit(",")
	}
	return 0
}

// decodeTypedFast is DecodeTyped's fast path; ok false means "use encoding/json", not "invalid".
func decodeTypedFast[T any](body []byte) (e *Typed[T], ok bool) {
	e = new(Typed[T])
	if !decodeTypedFastInto(body, e, "", "", nil) {
		return nil, false
	}
	return e, true
}

// decodeTypedFastInto is decodeTypedFast into e, which must be zero. A queue name equal to
// queue, or an id equal to id, is set to that string itself, without a copy; one, if not nil,
// holds a batch's only message.
// After ok false e is partly filled.
func decodeTypedFastInto[T any](body []byte, e *Typed[T], queue, id string, one *[1]T) (ok bool) {
	r := fastReader{b: body, ok: true}
	r.lit(`{"v":`)
	e.Version = r.integer()
	r.lit(`,"id":`)
	e.ID = r.strAs(id)
	r.lit(`,"q":`)
	e.Queue = r.strAs(queue)
	r.lit(`,"a":`)
	e.Attempt = r.integer()
	r.lit(`,"t":`)
	e.Created = r.time()
	if r.peek(`,"nb":`) {
		r.i += len(`,"nb":`)
		e.Due = r.time()
	}
	if r.peek(`,"dw":`) {
		r.i += len(`,"dw":`)
		e.DedupMillis = int64(r.integer())
	}
	if r.peek(`,"k":`) {
		r.i += len(`,"k":`)
		e.Key = r.str()
	}
	if r.peek(`,"pr":`) {
		r.i += len(`,"pr":`)
		e.Priority = r.integer()
	}
	if r.peek(`,"pl":`) {
		r.i += len(`,"pl":`)
		e.LeadMicros = int64(r.integer())
	}
	if r.peek(`,"fk":`) {
		r.i += len(`,"fk":`)
		e.FairKey = r.str()
	}
	if r.peek(`,"tc":`) {
		r.i += len(`,"tc":`)
		if tc := r.stringObject(); r.ok && json.Unmarshal(tc, &e.Trace) != nil {
			return false
		}
	}
	if r.peek(`,"tcs":`) {
		r.i += len(`,"tcs":`)
		if tcs := r.objectArray(); r.ok && json.Unmarshal(tcs, &e.Traces) != nil {
			return false
		}
	}
	if r.peek(`,"ti":`) {
		r.i += len(`,"ti":`)
		e.TraceOf = r.intArray()
	}
	if r.peek(`,"h":`) {
		r.i += len(`,"h":`)
		if hs := r.objectArray(); r.ok && json.Unmarshal(hs, &e.Headers) != nil {
			return false
		}
	}
	r.lit(`,"ids":`)
	start := r.i
	n := r.idCount()
	e.MessageIDs = IDList{n: n, raw: body[start:r.i]} // the body is the node's, never changed

	r.lit(`,"m":`)
	// The message array runs to the body's closing brace. If that slice is not one JSON value
	// (a key after "m", trailing bytes), encoding/json refuses it and the slow path decides.
	if !r.ok || !bytes.HasSuffix(body[r.i:], []byte("}")) {
		return false
	}
	msgs := body[r.i : len(body)-1]
	if e.MessageIDs.Len() == 1 && len(msgs) > 2 && msgs[0] == '[' && msgs[len(msgs)-1] == ']' {
		// One message: decode it into its element directly, without encoding/json's array
		// machinery. Anything but one JSON value between the brackets fails here and goes to
		// the path below (or the slow one), which decides.
		if one != nil {
			e.Messages = one[:]
		} else {
			e.Messages = make([]T, 1)
		}
		if v := msgs[1 : len(msgs)-1]; unmarshalPooled(v, &e.Messages[0]) || json.Unmarshal(v, &e.Messages[0]) == nil {
			return true
		}
		var zero T
		e.Messages[0] = zero // one is the caller's: leave no half-decoded message in it
	}
	// Sized from the id count, encoding/json fills the slice in place instead of growing it
	// (it appends to a slice reset to length zero; null still gives nil).
	e.Messages = make([]T, 0, e.MessageIDs.Len())
	if err := json.Unmarshal(msgs, &e.Messages); err != nil {
		return false
	}
	return true
}
