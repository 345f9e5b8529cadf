package parity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// Helpers of the ordered_cancel group (ordering_cancel.go).

// needNative ends a property on an adapter whose client be has no native lookup
// (core.BatchInspector) or, when cancel is set, no native cancel (core.BatchEditor), counted
// as not supported (neither passed nor failed).
func (x *X) needNative(be core.Backend, cancel bool) {
	x.T.Helper()
	what := ""
	if _, ok := be.(core.BatchInspector); !ok {
		what = "no native lookup (core.BatchInspector)"
	} else if _, ok := be.(core.BatchEditor); cancel && !ok {
		what = "no native cancel (core.BatchEditor)"
	}
	if what != "" {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %s; with a ledger it runs as ledger_cancel_head_middle_tail", x.h.Name(), what)
	}
}

// cancelMsgID is the message id the group gives message name ("k#3") of queue q.
func cancelMsgID(q *txmq.Queue[Msg], name string) string { return "oc/" + q.Name() + "/" + name }

// publishBatches publishes batches on n, one PublishMany per batch (its messages are named
// "key#seq" and share the key), waiting after each until the backend (raw) stores one more
// batch, so each is stored as one batch, in order. It records each message's id in ids (a new
// map when nil) and returns ids.
func publishBatches(x *X, raw core.Backend, q *txmq.Queue[Msg], n *txmq.Node, ids map[string]string, batches [][]string) map[string]string {
	x.T.Helper()
	if ids == nil {
		ids = map[string]string{}
	}
	base := depthOf(x, raw, q)
	stored := base.Ready + base.Delayed + base.InFlight
	for _, b := range batches {
		msgs, bids := make([]Msg, len(b)), make([]string, len(b))
		key, _ := splitSeq(b[0])
		for i, name := range b {
			msgs[i], bids[i] = Msg{K: name}, cancelMsgID(q, name)
			ids[name] = bids[i]
		}
		if err := q.PublishMany(context.Background(), n, msgs, txmq.Key(key), txmq.IDs(bids...)); err != nil {
			x.T.Fatalf("PublishMany %q on %q: %v", b, q.Name(), err)
		}
		stored++
		var last core.Depth
		x.eventually(func() bool {
			last = depthOf(x, raw, q)
			return last.Ready+last.Delayed+last.InFlight == stored
		}, func() string {
			return fmt.Sprintf("batch %q stored: Depths %+v, want %d batches in all", b, last, stored)
		})
	}
	return ids
}

// depthOf returns the backend's Depth of q.
func depthOf(x *X, raw core.Backend, q *txmq.Queue[Msg]) core.Depth {
	x.T.Helper()
	ds, err := raw.Depths(x.ctx(), []string{q.Name()})
	if err != nil {
		x.T.Fatalf("Depths of %q: %v", q.Name(), err)
	}
	return ds[q.Name()]
}

// checkDepth waits until the backend counts want's ready, delayed and in-flight batches of q.
func checkDepth(x *X, raw core.Backend, q *txmq.Queue[Msg], want core.Depth) {
	x.T.Helper()
	var last core.Depth
	x.eventually(func() bool {
		last = depthOf(x, raw, q)
		return last.Ready == want.Ready && last.Delayed == want.Delayed && last.InFlight == want.InFlight
	}, func() string {
		return fmt.Sprintf("Depths of %q: ready %d, delayed %d, in flight %d; want %d, %d, %d", q.Name(),
			last.Ready, last.Delayed, last.InFlight, want.Ready, want.Delayed, want.InFlight)
	})
}

// checkHolds waits until the backend, when it is a core.KeyHolder, says whether it holds key.
func checkHolds(x *X, raw core.Backend, q *txmq.Queue[Msg], key string, want bool) {
	x.T.Helper()
	h := core.KeyHolderOf(raw)
	if h == nil {
		return
	}
	var (
		held bool
		err  error
	)
	x.eventually(func() bool {
		held, err = h.HoldsKey(x.ctx(), q.Name(), key)
		return err == nil && held == want
	}, func() string {
		return fmt.Sprintf("HoldsKey(%q, %q) = %v, %v; want %v", q.Name(), key, held, err, want)
	})
}

// checkListed checks what the Inspector in says of q, whose stored batches are batches (in
// publish order, by message name; ids maps names to ids) and whose batch running is the one
// holding message running (none when ""): List returns exactly their messages; Get finds each
// in q with a batch id, the same for the messages of one batch and another for each batch.
// The running message reads running. The others, without a ledger (native), read queued at
// the head of their key and delayed behind it (Depths counts them delayed); with a ledger,
// queued or delayed.
func checkListed(x *X, in *txmq.Inspector, q *txmq.Queue[Msg], ids map[string]string, batches [][]string, running string, native bool) {
	x.T.Helper()
	want := map[string]bool{}
	for _, b := range batches {
		for _, name := range b {
			want[ids[name]] = true
		}
	}
	var (
		got     map[string]bool
		listErr error
	)
	list := func() bool {
		got, listErr = map[string]bool{}, nil
		ms, err := in.List(x.ctx(), core.MessageFilter{Queue: q.Name()})
		if err != nil {
			listErr = err
			return false
		}
		for _, m := range ms {
			got[m.ID] = true
		}
		return maps.Equal(got, want)
	}
	report := func() string {
		return fmt.Sprintf("List of queue %q: %d of %d stored messages (got %q, want %q), error %v", q.Name(),
			countIn(got, want), len(want), slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)), listErr)
	}
	if native {
		if !list() {
			x.T.Errorf("%s", report())
		}
	} else {
		x.eventually(list, report)
	}
	heads := map[string]bool{} // keys whose head was seen
	batchOf := map[string]string{}
	for _, b := range batches {
		key, _ := splitSeq(b[0])
		head := !heads[key]
		heads[key] = true
		bid := ""
		for _, name := range b {
			m, err := in.Get(x.ctx(), ids[name])
			if err != nil {
				x.T.Errorf("Get(%s) of stored message %s (head of its key: %v): %v", ids[name], name, head, err)
				continue
			}
			var ok bool
			wantState := ""
			switch {
			case name == running:
				ok, wantState = m.State == core.StateRunning, "running"
			case !native:
				ok, wantState = m.State == core.StateQueued || m.State == core.StateDelayed, "queued or delayed"
			case head && running == "":
				ok, wantState = m.State == core.StateQueued, "queued (the head of its key)"
			default:
				ok, wantState = m.State == core.StateDelayed, "delayed (held behind the head of its key)"
			}
			if !ok || m.Queue != q.Name() || m.BatchID == "" {
				x.T.Errorf("Get(%s) = %+v; want queue %q, a batch id and state %s", name, m, q.Name(), wantState)
			}
			switch {
			case bid == "":
				bid = m.BatchID
				if other, dup := batchOf[bid]; dup && bid != "" {
					x.T.Errorf("messages %s and %s, published in two batches, read batch %s both", other, name, bid)
				}
				batchOf[bid] = name
			case m.BatchID != bid:
				x.T.Errorf("message %s reads batch %s, %s of the same batch reads %s", name, m.BatchID, b[0], bid)
			}
		}
	}
}

func countIn(got, want map[string]bool) int {
	n := 0
	for id := range got {
		if want[id] {
			n++
		}
	}
	return n
}

// cancelOK cancels message name and fails the property unless the Inspector cancels it.
func cancelOK(x *X, in *txmq.Inspector, ids map[string]string, name string) {
	x.T.Helper()
	m, err := in.Cancel(x.ctx(), ids[name])
	if err != nil || m.State != core.StateCancelled {
		x.T.Errorf("Cancel(%s) of stored message %s = %+v, %v; want it cancelled", ids[name], name, m, err)
	}
}

// checkGone checks that a cancelled message name is gone: without a ledger (native) Get no
// longer finds it, with one it reads cancelled.
func checkGone(x *X, in *txmq.Inspector, ids map[string]string, name string, native bool) {
	x.T.Helper()
	if native {
		if m, err := in.Get(x.ctx(), ids[name]); !errors.Is(err, txmq.ErrMessageNotFound) {
			x.T.Errorf("Get(%s) of cancelled message %s = %+v, %v; want ErrMessageNotFound", ids[name], name, m, err)
		}
		return
	}
	waitState(x, in, ids[name], core.StateCancelled)
}

// runLog is a listener for an ordered queue that records the first delivery of each message
// (by Msg.K, "key#seq") in order, and checks that a batch holds one key and that a key runs one
// batch at a time. fn, when not nil, runs after the record.
type runLog struct {
	fn func(ctx context.Context, msgs []Msg) error

	mu     sync.Mutex
	first  []string       // messages in the order of their first delivery
	runs   map[string]int // deliveries per message
	active map[string]int // runs in progress per key
	bad    []string
}

func newRunLog(fn func(ctx context.Context, msgs []Msg) error) *runLog {
	return &runLog{fn: fn, runs: map[string]int{}, active: map[string]int{}}
}

// listen registers the log's listener for q on n.
func (l *runLog) listen(x *X, q *txmq.Queue[Msg], n *txmq.Node) {
	x.T.Helper()
	if err := q.Listen(n, l.run); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

func (l *runLog) run(ctx context.Context, msgs []Msg) error {
	l.mu.Lock()
	if len(msgs) == 0 {
		l.bad = append(l.bad, "an empty batch")
		l.mu.Unlock()
		return nil
	}
	key, _ := splitSeq(msgs[0].K)
	l.active[key]++
	if l.active[key] > 1 {
		l.bad = append(l.bad, fmt.Sprintf("key %s: %d batches running at once", key, l.active[key]))
	}
	for _, m := range msgs {
		if k, _ := splitSeq(m.K); k != key {
			l.bad = append(l.bad, fmt.Sprintf("one batch holds keys %s and %s", key, k))
		}
		if l.runs[m.K] == 0 {
			l.first = append(l.first, m.K)
		}
		l.runs[m.K]++
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.active[key]--
		l.mu.Unlock()
	}()
	if l.fn == nil {
		return nil
	}
	return l.fn(ctx, msgs)
}

func (l *runLog) firsts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.first)
}

// wait waits until every message of want was delivered.
func (l *runLog) wait(x *X, want []string) {
	x.T.Helper()
	x.eventually(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, k := range want {
			if l.runs[k] == 0 {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("messages %q delivered; delivered so far: %q", want, l.firsts()) })
}

// check fails the property unless the first deliveries were exactly want, in that order (no
// cancelled message, none out of order), with no batch breaking the key rules.
func (l *runLog) check(x *X, want []string) {
	x.T.Helper()
	got := l.firsts()
	l.mu.Lock()
	bad := slices.Clone(l.bad)
	l.mu.Unlock()
	if !slices.Equal(got, want) {
		x.T.Errorf("messages delivered (first deliveries, in order) %q; want %q", got, want)
	}
	if len(bad) > 0 {
		x.T.Errorf("per-key rules broken %d time(s): %s", len(bad), strings.Join(limit(bad, 5), "; "))
	}
}
