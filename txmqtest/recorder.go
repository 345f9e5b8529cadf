package txmqtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

// Recorder records what listeners receive: which messages arrived (a set keyed by a key func),
// how often each arrived (duplicates are counted, not hidden), when each first arrived, and
// the peak number of concurrent listener runs per queue and per (queue, node). It is safe for
// concurrent use; one Recorder may serve several queues and nodes.
type Recorder[T any] struct {
	key func(T) string

	mu       sync.Mutex
	count    map[string]int
	first    map[string]time.Time
	values   map[string]T
	runs     int
	messages int
	active   map[string]int // by queue
	peak     map[string]int
	nactive  map[[2]string]int // by queue, node
	npeak    map[[2]string]int
	changed  chan struct{}
}

// NewRecorder returns a Recorder keying messages by key; a nil key uses each message's JSON.
func NewRecorder[T any](key func(T) string) *Recorder[T] {
	if key == nil {
		key = func(v T) string {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Sprintf("%#v", v)
			}
			return string(b)
		}
	}
	return &Recorder[T]{
		key: key, count: map[string]int{}, first: map[string]time.Time{}, values: map[string]T{},
		active: map[string]int{}, peak: map[string]int{},
		nactive: map[[2]string]int{}, npeak: map[[2]string]int{},
		changed: make(chan struct{}),
	}
}

// Key returns the key of v.
func (r *Recorder[T]) Key(v T) string { return r.key(v) }

// Listen registers on node n a listener for q that records every run (under q's name and n's
// id) and then calls fn; a nil fn just succeeds.
func (r *Recorder[T]) Listen(q *txmq.Queue[T], n *txmq.Node, fn func(ctx context.Context, msgs []T) error) error {
	return q.Listen(n, r.Wrap(q.Name(), n.ID(), fn))
}

// Wrap returns a listener that records each run under queue and node, then calls fn (nil:
// succeed). The run counts as concurrent from before recording until fn returns.
func (r *Recorder[T]) Wrap(queue, node string, fn func(ctx context.Context, msgs []T) error) func(ctx context.Context, msgs []T) error {
	return func(ctx context.Context, msgs []T) error {
		end := r.Begin(queue, node)
		defer end()
		r.Record(msgs...)
		if fn == nil {
			return nil
		}
		return fn(ctx, msgs)
	}
}

// Begin marks the start of a run of queue on node for the concurrency peaks; call the returned
// func when the run ends.
func (r *Recorder[T]) Begin(queue, node string) (end func()) {
	k := [2]string{queue, node}
	r.mu.Lock()
	r.runs++
	r.active[queue]++
	r.peak[queue] = max(r.peak[queue], r.active[queue])
	r.nactive[k]++
	r.npeak[k] = max(r.npeak[k], r.nactive[k])
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.active[queue]--
			r.nactive[k]--
			r.mu.Unlock()
		})
	}
}

// Record records msgs as delivered now.
func (r *Recorder[T]) Record(msgs ...T) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		k := r.key(m)
		if r.count[k] == 0 {
			r.first[k] = now
			r.values[k] = m
		}
		r.count[k]++
		r.messages++
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// Changed returns a channel closed at the next Record.
func (r *Recorder[T]) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Distinct returns the number of distinct messages delivered.
func (r *Recorder[T]) Distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

// Total returns the number of messages delivered, duplicates included.
func (r *Recorder[T]) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.messages
}

// Duplicates returns Total minus Distinct.
func (r *Recorder[T]) Duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.messages - len(r.count)
}

// Runs returns the number of listener runs recorded.
func (r *Recorder[T]) Runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}

// Count returns how many times the message with key k was delivered.
func (r *Recorder[T]) Count(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[k]
}

// MinCount returns the smallest delivery count among keys (0 if a key was never delivered).
func (r *Recorder[T]) MinCount(keys []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := -1
	for _, k := range keys {
		if c := r.count[k]; m < 0 || c < m {
			m = c
		}
	}
	return max(m, 0)
}

// Has reports whether the message with key k was delivered.
func (r *Recorder[T]) Has(k string) bool { return r.Count(k) > 0 }

// FirstSeen returns when the message with key k was first delivered (zero if never).
func (r *Recorder[T]) FirstSeen(k string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first[k]
}

// Value returns the first delivered value of key k.
func (r *Recorder[T]) Value(k string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.values[k]
	return v, ok
}

// Keys returns the delivered keys, sorted.
func (r *Recorder[T]) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.count))
}

// HasAll reports whether every key in want was delivered.
func (r *Recorder[T]) HasAll(want []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range want {
		if r.count[k] == 0 {
			return false
		}
	}
	return true
}

// Diff compares the delivered set with want: missing were published but not delivered, extra
// were delivered but not in want (spurious). Both are sorted.
func (r *Recorder[T]) Diff(want []string) (missing, extra []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := make(map[string]bool, len(want))
	for _, k := range want {
		w[k] = true
		if r.count[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k := range r.count {
		if !w[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

// Peak returns the most concurrent runs of queue seen across all nodes.
func (r *Recorder[T]) Peak(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak[queue]
}

// NodePeak returns the most concurrent runs of queue seen on one node.
func (r *Recorder[T]) NodePeak(queue, node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.npeak[[2]string{queue, node}]
}

// MaxNodePeak returns the highest NodePeak of queue over all nodes, and that node.
func (r *Recorder[T]) MaxNodePeak(queue string) (peak int, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.npeak {
		if k[0] == queue && (v > peak || (v == peak && k[1] < node)) {
			peak, node = v, k[1]
		}
	}
	return peak, node
}

// Active returns the number of runs of queue in progress now.
func (r *Recorder[T]) Active(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[queue]
}

// ResetPeaks sets every peak to the current concurrency, to measure a new phase.
func (r *Recorder[T]) ResetPeaks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.peak {
		r.peak[k] = r.active[k]
	}
	for k := range r.npeak {
		r.npeak[k] = r.nactive[k]
	}
}

// Summary describes what was recorded, for failure messages.
func (r *Recorder[T]) Summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d runs, %d messages, %d distinct", r.runs, r.messages, len(r.count))
}
