package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

var (
	tA = map[string]string{"traceparent": "00-a"}
	tB = map[string]string{"traceparent": "00-b"}
	tC = map[string]string{"traceparent": "00-c"}
)

func TestSetTraces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		traces    []map[string]string
		of        []int
		wantTrace map[string]string
		wantList  []map[string]string
		wantOf    []int
	}{
		{"none", nil, nil, nil, nil, nil},
		{"one shared", []map[string]string{tA}, []int{0, 0, 0}, tA, nil, nil},
		{"one used of two", []map[string]string{tA, tB}, []int{1, 1}, tB, nil, nil},
		{"all without", []map[string]string{nil}, []int{0, 0}, nil, nil, nil},
		{"three", []map[string]string{tA, tB, tC}, []int{0, 1, 2}, tA, []map[string]string{tA, tB, tC}, []int{0, 1, 2}},
		{"renumbered by first use", []map[string]string{tA, tB, tC}, []int{2, 0, 2}, tC, []map[string]string{tC, tA}, []int{0, 1, 0}},
		{"without first", []map[string]string{nil, tB}, []int{0, 1}, nil, []map[string]string{{}, tB}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := Envelope{Version: Version, ID: "b", Queue: "q", MessageIDs: make([]string, len(tc.of)), Messages: make([]json.RawMessage, len(tc.of))}
			for i := range e.Messages {
				e.MessageIDs[i], e.Messages[i] = "m", json.RawMessage(`1`)
			}
			e.SetTraces(tc.traces, tc.of)
			if !reflect.DeepEqual(e.Trace, tc.wantTrace) || !reflect.DeepEqual(e.Traces, tc.wantList) || !reflect.DeepEqual(e.TraceOf, tc.wantOf) {
				t.Fatalf("got %v %v %v, want %v %v %v", e.Trace, e.Traces, e.TraceOf, tc.wantTrace, tc.wantList, tc.wantOf)
			}
			back, err := Decode(Encode(&e))
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range tc.of {
				want := tc.traces[x]
				if got := back.MessageTrace(i); !SameTrace(got, want) {
					t.Fatalf("message %d carries %v after a round trip, want %v", i, got, want)
				}
			}
		})
	}
}

// An envelope written before Traces existed (one trace context for the batch) still decodes,
// on both paths, and every message carries its trace context.
func TestTracesBackwardCompatible(t *testing.T) {
	t.Parallel()
	old := []byte(`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tc":{"traceparent":"00-a"},"ids":["x","y"],"m":[1,2]}`)
	e, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	if !SameTrace(e.MessageTrace(1), tA) || e.Traces != nil {
		t.Fatalf("message 1 carries %v (Traces %v), want %v", e.MessageTrace(1), e.Traces, tA)
	}
	typed, err := DecodeTyped[int](old)
	if err != nil {
		t.Fatal(err)
	}
	if got := TraceCounts(typed.Trace, typed.Traces, typed.TraceOf, len(typed.Messages)); !reflect.DeepEqual(got, []TraceCount{{tA, 2}}) {
		t.Fatalf("trace counts %v", got)
	}
	if _, fast := decodeTypedFast[int](old); !fast {
		t.Fatal("an old envelope left the fast path")
	}
}

func TestTraceIndicesChecked(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[1],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[-1],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ti":[0,0],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","tcs":[{"a":"1"}],"ids":["x"],"m":[1]}`,
		`{"v":1,"id":"b","q":"q","a":0,"t":"2026-01-02T03:04:05Z","ti":[0],"ids":["x"],"m":[1]}`,
	} {
		if _, err := Decode([]byte(body)); !errors.Is(err, core.ErrUndecodable) {
			t.Errorf("Decode(%s) = %v, want ErrUndecodable", body, err)
		}
		if _, err := DecodeTyped[int]([]byte(body)); !errors.Is(err, core.ErrUndecodable) {
			t.Errorf("DecodeTyped(%s) = %v, want ErrUndecodable", body, err)
		}
	}
}

func TestKeepMessagesAndCounts(t *testing.T) {
	t.Parallel()
	e := Envelope{Version: Version, ID: "b", Queue: "q", Created: time.Now(), MessageIDs: []string{"1", "2", "3", "4", "5"},
		Messages: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`), json.RawMessage(`3`), json.RawMessage(`4`), json.RawMessage(`5`)}}
	e.SetTraces([]map[string]string{tA, tB, nil, tC}, []int{0, 1, 1, 2, 3})
	if got := TraceCounts(e.Trace, e.Traces, e.TraceOf, len(e.Messages)); !reflect.DeepEqual(got, []TraceCount{{tA, 1}, {tB, 2}, {tC, 1}}) {
		t.Fatalf("counts %v: want a 1, b 2, c 1, the message without a context left out", got)
	}
	e.KeepMessages(func(i int) bool { return i == 1 || i == 2 })
	if !reflect.DeepEqual(e.MessageIDs, []string{"2", "3"}) || !SameTrace(e.Trace, tB) || e.Traces != nil || e.TraceOf != nil {
		t.Fatalf("kept %v with %v %v %v; want 2 and 3 carrying b alone", e.MessageIDs, e.Trace, e.Traces, e.TraceOf)
	}
}

// BenchmarkEncodeOne measures encoding a one-message batch with a trace context.
func BenchmarkEncodeOne(b *testing.B) {
	one, _ := json.Marshal(benchMsg{ID: 7, Email: "someone@example.com"})
	e := &Envelope{ID: core.NewID(), Queue: "bench", Created: time.Now(), Trace: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		MessageIDs: []string{core.NewID()}, Messages: []json.RawMessage{one}}
	b.ReportAllocs()
	for b.Loop() {
		Encode(e)
	}
}
