package envelope

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// fastSeeds are bodies at the edges of decodeTypedFast: what it must take and what it must
// leave to encoding/json.
func fastSeeds(f *testing.F) {
	f.Helper()
	for _, s := range []string{
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1] }`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]} `,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1],"m":[2,3]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":null}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x","y"],"m":["a",{"s":"}"}]}`,
		`{"v":01,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":-0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":-7,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":99999999999999999999,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":1.0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b\u0041","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":null,"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05.5+01:00","nb":"2026-01-02T03:04:06-01:00","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","nb":"2026-13-02T03:04:06Z","ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{},"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{"a":"1","a":"2"},"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{"a":1},"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{"a":"1",},"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x",],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[{"a":"s"}]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":[{"a":1,"s":"x","A":2}]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ids":["x"],"m":["\ud800"]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{"a":"1"},"tcs":[{"a":"1"},{}],"ti":[0,1],"ids":["x","y"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[],"ti":[],"ids":[],"m":[]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[00],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[-0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[1e0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[0,],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"},],"ti":[0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":1}],"ti":[0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":{},"ti":[0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ti":null,"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ti":[99999999999999999999],"ids":["x"],"m":[1]}`,
		"{\"v\":1,\"id\":\"b\",\"q\":\"q\",\"a\":0,\"t\":\"2026-01-02T03:04:05Z\",\"ids\":[\"x\"],\"m\":[\"\xff\"]}",
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":[{"a":"1"},{}],"ids":["x","y"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":[{"a":"1"}],"ids":["x","y"],"m":[1,2]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":[null],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":[{"a":1}],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","h":{},"ids":["x"],"m":[1]}`,
	} {
		f.Add([]byte(s))
	}
}

// sameTyped reports whether two typed envelopes hold the same batch (times by instant and
// offset: each decode of a "+01:00" time makes its own *time.Location).
func sameTyped[T any](a, b *Typed[T]) bool {
	sameTime := func(x, y time.Time) bool {
		return x.Equal(y) && x.Format(time.RFC3339Nano) == y.Format(time.RFC3339Nano)
	}
	return a.Version == b.Version && a.ID == b.ID && a.Queue == b.Queue && a.Attempt == b.Attempt &&
		sameTime(a.Created, b.Created) && sameTime(a.Due, b.Due) && reflect.DeepEqual(a.Trace, b.Trace) &&
		reflect.DeepEqual(a.Traces, b.Traces) && reflect.DeepEqual(a.TraceOf, b.TraceOf) &&
		a.MessageIDs.Len() == b.MessageIDs.Len() && reflect.DeepEqual(a.MessageIDs.IDs(), b.MessageIDs.IDs()) && reflect.DeepEqual(a.Messages, b.Messages)
}

// checkFastAgrees fails t unless DecodeTyped gives exactly what encoding/json alone gives for
// body (same batch or same error text), and reports whether the fast path took it.
func checkFastAgrees[T any](t *testing.T, body []byte) bool {
	t.Helper()
	got, err := DecodeTyped[T](body)
	want, wantErr := DecodeTypedJSON[T](body)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("%q: DecodeTyped error %v, encoding/json error %v", body, err, wantErr)
	case err != nil && err.Error() != wantErr.Error():
		t.Fatalf("%q: DecodeTyped error %q, encoding/json error %q", body, err, wantErr)
	case err == nil && !sameTyped(got, want):
		t.Fatalf("%q: DecodeTyped gives %+v, encoding/json %+v", body, got, want)
	}
	// The node's way (DecodeTypedInto with the queue's name and its own one-message array,
	// both reused from an earlier batch) gives the same.
	// The id hint is the backend's id of the batch: the body's own, or another (a backend
	// that stores batches under ids of its own), or none.
	queue, id := "q", "b"
	if wantErr == nil {
		queue, id = want.Queue, want.ID
	}
	for _, hint := range []string{id, "other" + id, ""} {
		into := &Typed[T]{Messages: make([]T, 3)}
		into.ID, into.Key = "stale", "stale"
		var one [1]T
		if intoErr := DecodeTypedInto(body, into, queue, hint, &one); (intoErr == nil) != (wantErr == nil) ||
			(intoErr != nil && intoErr.Error() != wantErr.Error()) || (intoErr == nil && !sameTyped(into, want)) {
			t.Fatalf("%q: DecodeTypedInto (id hint %q) gives %+v, %v; encoding/json %+v, %v", body, hint, into, intoErr, want, wantErr)
		}
	}
	_, fast := decodeTypedFast[T](body)
	return fast
}

// The fast path agrees with encoding/json on every body, for raw, struct and string messages.
func FuzzDecodeTypedFast(f *testing.F) {
	envelopeSeeds(f)
	fastSeeds(f)
	type msg struct {
		A int    `json:"a"`
		S string `json:"s"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastAgrees[json.RawMessage](t, body)
		checkFastAgrees[msg](t, body)
		checkFastAgrees[string](t, body)
		checkFastAgrees[any](t, body)
	})
}

// What Encode writes takes the fast path (headers of every shape it writes); what it
// cannot write (escaped ids or queue names) still decodes, through encoding/json.
func TestDecodeTypedFastTakesEncoderOutput(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	one := []json.RawMessage{json.RawMessage(`{"a":1,"s":"x"}`)}
	for _, tc := range []struct {
		name string
		env  Envelope
		fast bool
	}{
		{"one message", Envelope{ID: "01JABCDEF", Queue: "emails", Created: created, MessageIDs: []string{"m1"}, Messages: one}, true},
		{"retry", Envelope{ID: "b", Queue: "q", Attempt: 12, Created: created, MessageIDs: []string{"m1"}, Messages: one}, true},
		{"delayed", Envelope{ID: "b", Queue: "q", Created: created, Due: created.Add(time.Hour), MessageIDs: []string{"m1"}, Messages: one}, true},
		{"traced", Envelope{ID: "b", Queue: "q", Created: created, Trace: map[string]string{"traceparent": "00-abc-def-01", "tracestate": "k=v"}, MessageIDs: []string{"m1"}, Messages: one}, true},
		{"mixed traces", Envelope{ID: "b", Queue: "q", Created: created, Trace: map[string]string{"traceparent": "00-a"},
			Traces: []map[string]string{{"traceparent": "00-a"}, {}, {"traceparent": "00-b"}}, TraceOf: []int{0, 1, 2, 2},
			MessageIDs: []string{"m1", "m2", "m3", "m4"}, Messages: []json.RawMessage{one[0], one[0], one[0], one[0]}}, true},
		{"many", Envelope{ID: "b", Queue: "q", Created: created, MessageIDs: []string{"m1", "m2", "m3"}, Messages: []json.RawMessage{one[0], json.RawMessage(`null`), json.RawMessage(`{"s":"],}"}`)}}, true},
		{"empty", Envelope{ID: "b", Queue: "q", Created: created}, true},
		{"escaped queue", Envelope{ID: "b", Queue: "q\"<&>é", Created: created, MessageIDs: []string{"m1"}, Messages: one}, false},
		{"escaped id", Envelope{ID: "b", Queue: "q", Created: created, MessageIDs: []string{`m\1`}, Messages: one}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.env.Version = Version
			body := Encode(&tc.env)
			type msg struct {
				A int    `json:"a"`
				S string `json:"s"`
			}
			if fast := checkFastAgrees[msg](t, body); fast != tc.fast {
				t.Fatalf("%s: fast path %v, want %v", body, fast, tc.fast)
			}
			checkFastAgrees[json.RawMessage](t, body)
		})
	}
}

// BenchmarkDecodeOne measures decoding a one-message batch, the fast path against encoding/json.
func BenchmarkDecodeOne(b *testing.B) {
	one, _ := json.Marshal(benchMsg{ID: 7, Email: "someone@example.com"})
	body := Encode(&Envelope{ID: core.NewID(), Queue: "bench", Created: time.Now(),
		MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{one}})
	for _, bc := range []struct {
		name   string
		decode func([]byte) (*Typed[benchMsg], error)
	}{{"fast", DecodeTyped[benchMsg]}, {"json", DecodeTypedJSON[benchMsg]}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
