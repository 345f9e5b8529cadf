package parity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
)

func init() {
	register("delivery",
		property{name: "published_set", dup: true, run: deliveredSetIsPublishedSet},
		property{name: "isolated_queues", dup: true, run: queuesStayIsolated},
		property{name: "burst_10000", run: burstArrives},
		property{name: "large_batch", run: largeBatchArrivesIntact},
		property{name: "json_shape", run: jsonShapeRoundTrips},
	)
}

// deliveredSetIsPublishedSet: two nodes consume what one publishes in calls of random sizes;
// the delivered set is the published set, nothing spurious; under Dup every message arrives
// at least twice.
func deliveredSetIsPublishedSet(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 25})
	rec := newRecorder()
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, nil)
	listen(x, rec, q, b, nil)
	var keys []string
	for i := 0; len(keys) < 600; i++ {
		keys = append(keys, publishKeys(x, q, a, fmt.Sprintf("c%d", i), 1+rand.IntN(50), 50)...)
	}
	waitDelivered(x, rec, keys)
	x.idle(a, b)
	assertSame(x, rec, keys)
	if got := rec.MinCount(keys); got < x.copies() {
		x.T.Fatalf("a message was delivered %d times; with %d stored copies of each batch expected at least %d", got, x.copies(), x.copies())
	}
}

// queuesStayIsolated: 20 queues, two nodes listening to all of them; each queue's listener
// gets exactly its own messages.
func queuesStayIsolated(x *X) {
	const queues, per = 20, 15
	// Forty listeners on one backend: on a loaded machine (SQLite's one writer most of all) a
	// claim may wait long enough for its lease to pass before it runs, so the nodes take a lease
	// the measured latency keeps (keptLease).
	lease := x.keptLease(x.Caps.Lease)
	a, b := x.node(txmq.NodeOptions{Lease: lease}), x.node(txmq.NodeOptions{Lease: lease})
	type qr struct {
		q    *txmq.Queue[Msg]
		rec  *txmqtest.Recorder[Msg]
		keys []string
	}
	all := make([]*qr, queues)
	var wrong atomic.Int64
	for i := range all {
		r := &qr{q: declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 4}), rec: newRecorder()}
		prefix := r.q.Name() + "/"
		check := func(_ context.Context, msgs []Msg) error {
			for _, m := range msgs {
				if len(m.K) < len(prefix) || m.K[:len(prefix)] != prefix {
					wrong.Add(1)
				}
			}
			return nil
		}
		listen(x, r.rec, r.q, a, check)
		listen(x, r.rec, r.q, b, check)
		all[i] = r
	}
	for _, r := range all {
		r.keys = publishKeys(x, r.q, a, r.q.Name()+"/m", per, 3)
	}
	// The wait is bounded by throughput over every queue: it lasts while runs of any queue
	// keep coming (progressing), and fails when all of them stop.
	x.progressing(func() bool {
		for _, r := range all {
			if !r.rec.HasAll(r.keys) {
				return false
			}
		}
		return true
	}, func() any {
		n := 0
		for _, r := range all {
			n += r.rec.Runs()
		}
		return n
	}, func() string {
		for _, r := range all {
			if missing, _ := r.rec.Diff(r.keys); len(missing) > 0 {
				return fmt.Sprintf("every message delivered: queue %s misses %d of %d (first: %s); %s", r.q.Name(), len(missing), len(r.keys), first(missing), r.rec.Summary())
			}
		}
		return "every message delivered"
	})
	x.idle(a, b)
	for _, r := range all {
		assertSame(x, r.rec, r.keys)
	}
	if n := wrong.Load(); n > 0 {
		x.T.Fatalf("%d messages were delivered to another queue's listener", n)
	}
}

// burstArrives: 10,000 messages published in bursts of 500 from two nodes at once all arrive.
func burstArrives(x *X) {
	const total, burst = 10000, 500
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec := newRecorder()
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, nil)
	listen(x, rec, q, b, nil)
	keys := make([][]string, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, n := range []*txmq.Node{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < total/2/burst; j++ {
				msgs := make([]Msg, burst)
				for k := range msgs {
					msgs[k] = Msg{K: fmt.Sprintf("n%d-b%d-%d", i, j, k)}
					keys[i] = append(keys[i], msgs[k].K)
				}
				if err := q.PublishMany(context.Background(), n, msgs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		x.T.Fatalf("PublishMany: %v", err)
	}
	all := append(keys[0], keys[1]...)
	waitDelivered(x, rec, all)
	x.idle(a, b)
	assertSame(x, rec, all)
}

// largeBatchArrivesIntact: one batch of about 600 KiB (80 messages of 4 KiB and one of
// 300 KiB), over SQS's 256 KiB limit, arrives with every byte intact.
func largeBatchArrivesIntact(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec := newRecorder()
	var biggest atomic.Int64
	n := x.node(txmq.NodeOptions{})
	want := map[string]string{}
	var msgs []Msg
	for i := range 81 {
		size := 4 << 10
		if i == 80 {
			size = 300 << 10
		}
		p := randomText(size)
		k := fmt.Sprintf("big-%d", i)
		want[k] = digest(p)
		msgs = append(msgs, Msg{K: k, P: p})
	}
	if err := q.PublishMany(context.Background(), n, msgs); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	listen(x, rec, q, n, func(_ context.Context, got []Msg) error {
		size := 0
		for _, m := range got {
			size += len(m.P)
		}
		for {
			old := biggest.Load()
			if int64(size) <= old || biggest.CompareAndSwap(old, int64(size)) {
				break
			}
		}
		return nil
	})
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	waitDelivered(x, rec, keys)
	for k, d := range want {
		got, _ := rec.Value(k)
		if digest(got.P) != d {
			x.T.Fatalf("message %s arrived corrupted (%d bytes)", k, len(got.P))
		}
	}
	x.T.Logf("largest delivered batch carried %d KiB of payload (backend MaxMessageSize %d bytes, 0 = unlimited)", biggest.Load()>>10, x.Caps.MaxMessageSize)
	x.idle(n)
}

func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.-_:;!?"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Shape exercises what encoding/json promises to round-trip.
type Shape struct {
	K         string         `json:"k"`
	Int64Max  int64          `json:"i64max"`
	Int64Min  int64          `json:"i64min"`
	Uint64Max uint64         `json:"u64max"`
	Float     float64        `json:"f"`
	Tiny      float64        `json:"tiny"`
	Huge      float64        `json:"huge"`
	Text      string         `json:"text"`
	Bytes     []byte         `json:"bytes"`
	Nil       *int           `json:"nil"`
	Empty     []int          `json:"empty"`
	Nested    ShapeNested    `json:"nested"`
	Any       map[string]any `json:"any"`
}

// ShapeNested is a nested object of Shape.
type ShapeNested struct {
	Deeper struct {
		List []ShapeNested `json:"list,omitempty"`
		Name string        `json:"name"`
	} `json:"deeper"`
	Tags map[string]string `json:"tags"`
}

// jsonShapeRoundTrips: nested objects, unicode, the int64/uint64 extremes in typed fields and
// float64 precision arrive exactly as published.
func jsonShapeRoundTrips(x *X) {
	q := declare(x, txmq.QueueConfig[Shape]{})
	rec := txmqtest.NewRecorder(func(s Shape) string { return s.K })
	n := x.node(txmq.NodeOptions{})
	listen(x, rec, q, n, nil)
	var nested ShapeNested
	nested.Deeper.Name = "ünïcödé ✓ 日本語 🎉"
	nested.Deeper.List = []ShapeNested{{Tags: map[string]string{"k": "v"}}}
	nested.Tags = map[string]string{"é": "\u2028\u2029", "quote": `"\<>&`, "nul": "a\x00b"}
	want := Shape{
		K: "shape", Int64Max: math.MaxInt64, Int64Min: math.MinInt64, Uint64Max: math.MaxUint64,
		Float: 0.1 + 0.2, Tiny: math.SmallestNonzeroFloat64, Huge: math.MaxFloat64,
		Text:  "héllo wörld — Ωμέγα — עברית — 🧪\t\n\r end",
		Bytes: []byte{0, 1, 2, 0xfe, 0xff}, Empty: []int{}, Nested: nested,
		Any: map[string]any{"a": 1.5, "b": []any{"x", true, nil, 2.0}, "c": map[string]any{"d": "ü"}},
	}
	if err := q.Publish(context.Background(), n, want); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitDelivered(x, rec, []string{"shape"})
	got, _ := rec.Value("shape")
	if !reflect.DeepEqual(got, want) {
		x.T.Fatalf("the message changed on the way:\n got  %#v\n want %#v", got, want)
	}
	x.idle(n)
}
