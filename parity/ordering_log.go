package parity

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

// seqMsg is message seq of key: Msg.K is "key#seq".
func seqMsg(key string, seq int) Msg { return Msg{K: key + "#" + strconv.Itoa(seq)} }

// orderLog checks what listeners receive on an ordered queue: every batch holds one key, at
// most one batch per key runs at a time, and a message is delivered only once every earlier
// message of its key was (a repeat of an earlier one is allowed: at-least-once).
type orderLog struct {
	mu      sync.Mutex
	next    map[string]int       // per key, the lowest sequence number not delivered yet
	active  map[string]int       // per key, runs in progress
	first   map[string]time.Time // per "key#seq", its first delivery
	bad     []string
	batches int
}

func newOrderLog() *orderLog {
	return &orderLog{next: map[string]int{}, active: map[string]int{}, first: map[string]time.Time{}}
}

func splitSeq(k string) (string, int) {
	i := strings.LastIndexByte(k, '#')
	if i < 0 {
		return k, -1
	}
	n, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return k, -1
	}
	return k[:i], n
}

// begin records the start of a run of msgs; call the returned func when it ends.
func (o *orderLog) begin(msgs []Msg) (end func()) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches++
	if len(msgs) == 0 {
		o.bad = append(o.bad, "an empty batch")
		return func() {}
	}
	key, _ := splitSeq(msgs[0].K)
	o.active[key]++
	if o.active[key] > 1 {
		o.bad = append(o.bad, fmt.Sprintf("key %s: %d batches running at once", key, o.active[key]))
	}
	for _, m := range msgs {
		k, seq := splitSeq(m.K)
		if k != key {
			o.bad = append(o.bad, fmt.Sprintf("one batch holds keys %s and %s", key, k))
			continue
		}
		if seq > o.next[k] {
			o.bad = append(o.bad, fmt.Sprintf("key %s: message %d delivered before message %d", k, seq, o.next[k]))
		}
		if seq == o.next[k] {
			o.next[k]++
		}
		if _, ok := o.first[m.K]; !ok {
			o.first[m.K] = now
		}
	}
	return func() {
		o.mu.Lock()
		o.active[key]--
		o.mu.Unlock()
	}
}

// delivered reports how many messages of key were delivered in order from 0.
func (o *orderLog) delivered(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next[key]
}

// firstAt returns when message seq of key was first delivered (zero: not yet).
func (o *orderLog) firstAt(key string, seq int) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first[key+"#"+strconv.Itoa(seq)]
}

// complete reports whether every key of want got all its messages.
func (o *orderLog) complete(want map[string]int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range want {
		if o.next[k] < n {
			return false
		}
	}
	return true
}

// seenAll reports whether every message of want (per key, sequence numbers 0 to n-1) was
// delivered at least once, in order or not.
func (o *orderLog) seenAll(want map[string]int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range want {
		for seq := range n {
			if _, ok := o.first[k+"#"+strconv.Itoa(seq)]; !ok {
				return false
			}
		}
	}
	return true
}

// missing lists the messages of want never delivered, for a failed wait.
func (o *orderLog) missing(want map[string]int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var lost []string
	for k, n := range want {
		for seq := range n {
			if _, ok := o.first[k+"#"+strconv.Itoa(seq)]; !ok {
				lost = append(lost, k+"#"+strconv.Itoa(seq))
			}
		}
	}
	return fmt.Sprintf("%d never delivered (%s); %d batches; %d order violations (%s)", len(lost), strings.Join(limit(lost, 8), ", "), o.batches, len(o.bad), strings.Join(limit(o.bad, 3), "; "))
}

// summary says what is missing and what went wrong, for a failed wait.
func (o *orderLog) summary(want map[string]int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	missing, firstKey := 0, "-"
	for k, n := range want {
		if o.next[k] < n {
			if missing == 0 {
				firstKey = fmt.Sprintf("%s (%d of %d)", k, o.next[k], n)
			}
			missing++
		}
	}
	return fmt.Sprintf("%d of %d keys incomplete (first: %s); %d batches; %d violations (%s)", missing, len(want), firstKey, o.batches, len(o.bad), strings.Join(limit(o.bad, 3), "; "))
}

// check fails the property on any violation.
func (o *orderLog) check(x *X) {
	x.T.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) > 0 {
		x.T.Fatalf("per-key order broken %d time(s): %s", len(o.bad), strings.Join(limit(o.bad, 5), "; "))
	}
}

// listener returns a listener that checks order, then calls fn (nil: succeed).
func (o *orderLog) listener(fn func(ctx context.Context, msgs []Msg) error) func(ctx context.Context, msgs []Msg) error {
	return func(ctx context.Context, msgs []Msg) error {
		end := o.begin(msgs)
		defer end()
		if fn == nil {
			return nil
		}
		return fn(ctx, msgs)
	}
}

// listenOrdered registers o's checking listener for q on n.
func listenOrdered(x *X, o *orderLog, q *txmq.Queue[Msg], n *txmq.Node, fn func(ctx context.Context, msgs []Msg) error) {
	x.T.Helper()
	if err := q.Listen(n, o.listener(fn)); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// publishInterleaved publishes per messages for each of keys, one message per call, key after
// key (round robin), on n with ctx and opts; it returns the messages per key.
func publishInterleaved(ctx context.Context, x *X, q *txmq.Queue[Msg], n *txmq.Node, keys []string, per int, opts ...txmq.PublishOption) map[string]int {
	x.T.Helper()
	for seq := range per {
		for _, k := range keys {
			if err := q.Publish(ctx, n, seqMsg(k, seq), append([]txmq.PublishOption{txmq.Key(k)}, opts...)...); err != nil {
				x.T.Fatalf("Publish %s#%d on %q: %v", k, seq, q.Name(), err)
			}
		}
	}
	want := make(map[string]int, len(keys))
	for _, k := range keys {
		want[k] = per
	}
	return want
}

func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return keys
}

// waitOrdered waits until every key got its messages, then checks the order.
func waitOrdered(x *X, o *orderLog, want map[string]int) {
	x.T.Helper()
	x.progressing(func() bool { return o.complete(want) }, o.runs, func() string { return "every message delivered: " + o.summary(want) })
	o.check(x)
}

// runs returns how many batches the log has seen begin: the progress of a wait.
func (o *orderLog) runs() any {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.batches
}
