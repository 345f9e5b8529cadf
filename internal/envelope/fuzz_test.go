package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// Fuzz targets: plain `go test` runs their seeds (f.Add and testdata/fuzz); scripts/fuzz runs
// each with -fuzz for a chosen time.

// envelopeSeeds are valid and broken envelopes for the decoder targets.
func envelopeSeeds(f *testing.F) {
	f.Helper()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []*Envelope{
		{ID: "b1", Queue: "q", Created: created, MessageIDs: []string{"m1"}, Messages: []json.RawMessage{json.RawMessage(`"hi"`)}},
		{ID: "b2", Queue: "q\"<&>é", Attempt: 3, Created: created, Trace: map[string]string{"traceparent": "00-x"},
			MessageIDs: []string{"m1", "m\\2", "m3"}, Messages: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`[1,2]`), json.RawMessage(`null`)}},
		{ID: "b3", Queue: "q", Created: created},
		{ID: "b4", Queue: "q", Created: created, Due: created.Add(time.Minute), MessageIDs: []string{"m1"}, Messages: []json.RawMessage{json.RawMessage(`1`)}},
		{ID: "b5", Queue: "q", Created: created, Trace: map[string]string{"traceparent": "00-a"},
			Traces: []map[string]string{{"traceparent": "00-a"}, {}, {"traceparent": "00-b", "tracestate": "k=v"}}, TraceOf: []int{0, 1, 2, 0},
			MessageIDs: []string{"m1", "m2", "m3", "m4"}, Messages: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`), json.RawMessage(`3`), json.RawMessage(`4`)}},
	} {
		e.Version = Version
		f.Add(Encode(e))
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"v":1}`, `{"v":2,"id":"b","q":"q","ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","ids":["a"],"m":[]}`,
		`{"v":1,"id":"b","q":"q","ids":[1],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","ids":null,"m":null}`,
		`{"v":1,"id":"b","q":"q","ids":["a\"","b\\"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","ids":[ "a" , "b" ],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","ids":["a"],"m":[1],"ids":["a","b"]}`,
		`{"v":1,"id":"b","q":"q","t":"not a time","ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","a":-1,"ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","t":"2026-01-02T03:04:05+01:00","nb":"2026-01-02T03:04:06.5-01:00","ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","t":"9999-12-31T23:00:00-02:00","ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","nb":"0000-01-01T00:30:00+01:00","ids":["x"],"m":["y"]}`,
		`{"v":1,"id":"b","q":"q","tcs":[{"a":"1"},{"a":"2"}],"ti":[1,0],"ids":["x","y"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","tcs":[{"a":"1"}],"ti":[1],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","tcs":[{"a":"1"}],"ti":[0,0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","ti":[0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","tcs":[null,{"a":"1"}],"ti":[0,1],"ids":["x","y"],"m":[1,2]}`,
	} {
		f.Add([]byte(s))
	}
}

// Decode never panics; what it accepts re-encodes to an envelope that decodes to the
// same batch, and the typed decoder (what listeners use) accepts it too, with the same header.
func FuzzDecodeEnvelope(f *testing.F) {
	envelopeSeeds(f)
	fastSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := Decode(body)
		typed, terr := DecodeTyped[json.RawMessage](body)
		if err != nil {
			if !errors.Is(err, core.ErrUndecodable) {
				t.Fatalf("Decode error does not wrap ErrUndecodable: %v", err)
			}
			if terr != nil && !errors.Is(terr, core.ErrUndecodable) {
				t.Fatalf("DecodeTyped error does not wrap ErrUndecodable: %v", terr)
			}
			return
		}
		if terr != nil {
			t.Fatalf("Decode accepts %q, DecodeTyped refuses it: %v", body, terr)
		}
		if typed.ID != e.ID || typed.Queue != e.Queue || typed.Attempt != e.Attempt || !reflect.DeepEqual(typed.Traces, e.Traces) || !reflect.DeepEqual(typed.TraceOf, e.TraceOf) || typed.MessageIDs.Len() != len(e.MessageIDs) || fmt.Sprint(typed.MessageIDs.IDs()) != fmt.Sprint(e.MessageIDs) || len(typed.Messages) != len(e.Messages) {
			t.Fatalf("decoders disagree on %q: %+v vs %+v", body, typed, e)
		}
		again, err := Decode(Encode(e))
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", body, err)
		}
		if !sameEnvelope(e, again) {
			t.Fatalf("round trip changed the batch:\n%+v\n%+v", e, again)
		}
	})
}

// The typed decoder never panics and never accepts what Decode refuses (other than
// for the message type: a struct target may refuse messages Decode keeps raw).
func FuzzDecodeTyped(f *testing.F) {
	envelopeSeeds(f)
	fastSeeds(f)
	type msg struct {
		A int    `json:"a"`
		S string `json:"s"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, rawErr := DecodeTyped[json.RawMessage](body)
		_, structErr := DecodeTyped[msg](body)
		_, strErr := DecodeTyped[string](body)
		_, err := Decode(body)
		for _, e := range []error{rawErr, structErr, strErr} {
			if e != nil && !errors.Is(e, core.ErrUndecodable) {
				t.Fatalf("DecodeTyped error does not wrap ErrUndecodable: %v", e)
			}
		}
		if err != nil && rawErr == nil {
			t.Fatalf("DecodeTyped accepts %q, Decode refuses it: %v", body, err)
		}
	})
}

// ReencodeAttempt never panics; what it returns decodes to the same batch with the new attempt.
func FuzzReencodeAttempt(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, attempt := range []int{0, 1, 7, -1, 1 << 40} {
			out, err := ReencodeAttempt(body, attempt)
			if err != nil {
				if !errors.Is(err, core.ErrUndecodable) {
					t.Fatalf("error does not wrap ErrUndecodable: %v", err)
				}
				return
			}
			before, _ := Decode(body)
			after, err := Decode(out)
			if err != nil {
				t.Fatalf("ReencodeAttempt(%q, %d) = %q, which does not decode: %v", body, attempt, out, err)
			}
			if after.Attempt != attempt {
				t.Fatalf("attempt %d, want %d", after.Attempt, attempt)
			}
			before.Attempt = attempt
			if !sameEnvelope(before, after) {
				t.Fatalf("ReencodeAttempt changed more than the attempt:\n%+v\n%+v", before, after)
			}
		}
	})
}

// Split never panics; its halves hold every message and id, in order, with the header.
func FuzzSplitEnvelope(f *testing.F) {
	envelopeSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		parts, err := Split(body)
		if err != nil {
			if !errors.Is(err, core.ErrUndecodable) && !errors.Is(err, core.ErrInvalidPayload) {
				t.Fatalf("error wraps neither ErrUndecodable nor ErrInvalidPayload: %v", err)
			}
			return
		}
		whole, _ := Decode(body)
		var ids []string
		var msgs []string
		for _, p := range parts {
			e, err := Decode(p)
			if err != nil {
				t.Fatalf("half %q does not decode: %v", p, err)
			}
			if e.Queue != whole.Queue || e.Attempt != whole.Attempt || e.ID == whole.ID || len(e.Messages) == 0 {
				t.Fatalf("half %+v of %+v", e, whole)
			}
			ids = append(ids, e.MessageIDs...)
			for i, m := range e.Messages {
				msgs = append(msgs, string(m))
				if w := whole.MessageTrace(len(msgs) - 1); !SameTrace(e.MessageTrace(i), w) {
					t.Fatalf("message %d of a half carries trace %v, in the whole batch %v", len(msgs)-1, e.MessageTrace(i), w)
				}
			}
		}
		var want []string
		for _, m := range whole.Messages {
			want = append(want, string(m))
		}
		if !slices.Equal(ids, whole.MessageIDs) || !slices.Equal(msgs, want) {
			t.Fatalf("halves hold %v %v, want %v %v", ids, msgs, whole.MessageIDs, want)
		}
	})
}

func sameEnvelope(a, b *Envelope) bool {
	if a.Version != b.Version || a.ID != b.ID || a.Queue != b.Queue || a.Attempt != b.Attempt ||
		!a.Created.Equal(b.Created) || !a.Due.Equal(b.Due) || !slices.Equal(a.MessageIDs, b.MessageIDs) || len(a.Messages) != len(b.Messages) ||
		!SameTrace(a.Trace, b.Trace) || len(a.Traces) != len(b.Traces) || !slices.Equal(a.TraceOf, b.TraceOf) {
		return false
	}
	for i := range a.Traces {
		if !SameTrace(a.Traces[i], b.Traces[i]) {
			return false
		}
	}
	for i := range a.Messages {
		if string(a.Messages[i]) != string(b.Messages[i]) {
			return false
		}
	}
	return true
}

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}
