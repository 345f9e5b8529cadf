package parity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// X is one property's world: its test, its Env, a fresh registry, and helpers to make nodes
// and clients the suite way. Exported only so that property funcs have a name to take.
type X struct {
	T    *testing.T
	Env  Env
	Caps Caps
	// Dup is set when every published batch is stored twice.
	Dup bool
	// Registry is the property's own registry.
	Registry *txmq.Registry
	// DeadLetters records the dead letters of the property's nodes.
	DeadLetters *txmqtest.DeadLetterRecorder

	h      Harness
	opts   Options
	logger *slog.Logger

	mu     sync.Mutex
	checks []*checked
	kept   map[time.Duration]time.Duration // keptLease's leases, by base

	// unsupported is set by a property that needs a capability the adapter lacks.
	unsupported atomic.Bool
}

func (s *suite) newX(t *testing.T, dup bool) *X {
	x := &X{T: t, Caps: s.caps, Dup: dup, Registry: txmq.NewRegistry(), DeadLetters: &txmqtest.DeadLetterRecorder{}, h: s.h, opts: s.opts}
	if os.Getenv("TXMQ_PARITY_LOG") != "" {
		x.logger = txmqtest.TestLogger(t)
	} else {
		x.logger = newFailLogger(t)
	}
	// Registered before the Env and the nodes: runs after they are closed.
	t.Cleanup(x.checkClaims)
	x.Env = s.h.Open(t)
	return x
}

// copies is how many copies of each published batch the backend stores.
func (x *X) copies() int {
	if x.Dup {
		return 2
	}
	return 1
}

// queueName returns a new portable queue name, unique across properties and processes.
func (x *X) queueName() string {
	return fmt.Sprintf("p%s-%d", runID, queueSeq.Add(1))
}

// client returns a new client of the Env, wrapped to check every Fetch result (and to store
// every batch twice under Dup).
func (x *X) client() (core.Backend, *checked) {
	b := x.Env.Backend(x.T)
	if b == nil {
		x.T.Fatalf("parity[%s]: Env.Backend returned nil", x.h.Name())
	}
	if x.Dup {
		b = txmqtest.Duplicate(b)
	}
	c := &checked{Backend: b, claims: map[string]int{}, perFetch: map[string]int{}}
	x.mu.Lock()
	x.checks = append(x.checks, c)
	x.mu.Unlock()
	return c, c
}

// rawClient returns a new client without the duplicate wrapper, for driving the backend
// directly.
func (x *X) rawClient() core.Backend {
	b := x.Env.Backend(x.T)
	if b == nil {
		x.T.Fatalf("parity[%s]: Env.Backend returned nil", x.h.Name())
	}
	return b
}

// node makes a started node on a new client of the Env with the suite's settings (zero
// fields of o), closed in t.Cleanup.
func (x *X) node(o txmq.NodeOptions) *txmq.Node {
	n, _ := x.nodeChecked(o)
	return n
}

// nodeOn is node on backend be instead of a new client.
func (x *X) nodeOn(be core.Backend, o txmq.NodeOptions) *txmq.Node {
	n, _ := x.nodeCheckedOn(be, o)
	return n
}

// nodeChecked is node that also returns the node's checking client.
func (x *X) nodeChecked(o txmq.NodeOptions) (*txmq.Node, *checked) {
	return x.nodeCheckedOn(nil, o)
}

// nodeCheckedOn is nodeChecked on be when it is not nil (the checking client is then nil).
func (x *X) nodeCheckedOn(be core.Backend, o txmq.NodeOptions) (*txmq.Node, *checked) {
	x.T.Helper()
	var c *checked
	if be == nil {
		be, c = x.client()
	}
	o.Registry = x.Registry
	if o.Lease == 0 {
		o.Lease = x.Caps.Lease
	}
	if o.PollWait == 0 {
		o.PollWait = x.Caps.PollWait
	}
	if o.DeadLetters == nil {
		o.DeadLetters = x.DeadLetters
	}
	if o.Logger == nil {
		o.Logger = x.logger
	}
	return txmqtest.StartNode(x.T, be, &o), c
}

// eventually waits up to Caps.Timeout for cond.
func (x *X) eventually(cond func() bool, msgAndArgs ...any) {
	x.T.Helper()
	txmqtest.Eventually(x.T, x.Caps.Timeout, cond, msgAndArgs...)
}

// maxProgressWait is how many Caps.Timeout a progressing wait lasts at most in all: long
// enough for a machine at load 15 to 30 (SQLite's single writer beside other suites ran
// ordering/thousand_keys_interleaved_dup at 15 batches a second there, 2,481 of its 4,000 in
// eight Timeouts), short enough to end a livelock whose progress never completes.
const maxProgressWait = 20

// progressing waits for cond, as eventually does, in a wait bounded by throughput (many
// batches through a loaded machine) rather than by one event: it lasts while progress (a
// count of runs, a summary) keeps changing, and fails after Caps.Timeout without a change, or
// after maxProgressWait times Caps.Timeout in all. A machine slowed by other processes then
// delivers late but still passes; a backend that stops delivering fails as before.
func (x *X) progressing(cond func() bool, progress func() any, msg func() string) {
	x.T.Helper()
	start := time.Now()
	last, moved := progress(), start
	for !cond() {
		now := time.Now()
		if p := progress(); p != last {
			last, moved = p, now
		}
		if now.Sub(moved) > x.Caps.Timeout || now.Sub(start) > maxProgressWait*x.Caps.Timeout {
			x.T.Fatalf("parity: not true within %v (%v since the last progress): %s", now.Sub(start).Round(time.Millisecond), now.Sub(moved).Round(time.Millisecond), msg())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctx returns a context bounded by Caps.Timeout.
func (x *X) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
	x.T.Cleanup(cancel)
	return ctx
}

// checkClaims fails the property if any Fetch broke the slot rules.
func (x *X) checkClaims() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range x.checks {
		for _, v := range c.violations() {
			x.T.Errorf("parity[%s]: Fetch broke the contract: %s", x.h.Name(), v)
		}
	}
}

// checked wraps a client and checks every Fetch result against its request: claims only for
// requested queues, at most Free per capped queue, at most one per Exclusive queue.
type checked struct {
	core.Backend

	mu       sync.Mutex
	fetches  int
	claims   map[string]int // by queue, over all fetches
	perFetch map[string]int // by queue, most claims in one fetch
	bad      []string
}

// Unwrap returns the wrapped client, so capabilities (core.OrdersKeys) are seen through it.
func (c *checked) Unwrap() core.Backend { return c.Backend }

// Split forwards to the wrapped backend's core.Splitter; without one it stores nothing and
// returns an error wrapping errors.ErrUnsupported, so that the engine publishes the parts and
// acks, as it does on such a backend unwrapped.
func (c *checked) Split(ctx context.Context, cl *core.Claim, parts []core.Part) error {
	if s, ok := c.Backend.(core.Splitter); ok {
		return s.Split(ctx, cl, parts)
	}
	return fmt.Errorf("parity: %w: backend %T does not implement core.Splitter", errors.ErrUnsupported, c.Backend)
}

func (c *checked) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	claims, err := c.Backend.Fetch(ctx, req)
	free := make(map[string]core.QueueSlots, len(req.Queues))
	for _, qs := range req.Queues {
		free[qs.Queue] = qs
	}
	got := map[string]int{}
	for _, cl := range claims {
		if cl == nil {
			c.violation("Fetch returned a nil claim")
			continue
		}
		got[cl.Queue]++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetches++
	for q, n := range got {
		c.claims[q] += n
		c.perFetch[q] = max(c.perFetch[q], n)
		qs, ok := free[q]
		switch {
		case !ok:
			c.bad = append(c.bad, fmt.Sprintf("node %s got %d claim(s) of queue %q it did not ask for", req.Node, n, q))
		case qs.Exclusive && n > 1:
			c.bad = append(c.bad, fmt.Sprintf("node %s got %d claims of Exclusive queue %q in one fetch", req.Node, n, q))
		case qs.Free != core.Unlimited && n > qs.Free:
			c.bad = append(c.bad, fmt.Sprintf("node %s got %d claims of queue %q with %d free slots", req.Node, n, q, qs.Free))
		}
	}
	return claims, err
}

func (c *checked) violation(s string) {
	c.mu.Lock()
	c.bad = append(c.bad, s)
	c.mu.Unlock()
}

func (c *checked) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

func (c *checked) claimed(queue string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims[queue]
}

func (c *checked) fetchCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetches
}

// Msg is the message type of most properties: a key and optional padding.
type Msg struct {
	K string `json:"k"`
	P string `json:"p,omitempty"`
}

func msgKey(m Msg) string { return m.K }

func newRecorder() *txmqtest.Recorder[Msg] { return txmqtest.NewRecorder(msgKey) }

// declare declares a queue with a unique name in x's registry.
func declare[T any](x *X, cfg txmq.QueueConfig[T]) *txmq.Queue[T] {
	x.T.Helper()
	if cfg.Transactional == 0 {
		cfg.Transactional = txmq.Try
	}
	q, err := txmq.DeclareIn(x.Registry, x.queueName(), cfg)
	if err != nil {
		x.T.Fatalf("declaring a queue: %v", err)
	}
	return q
}

// listen registers rec's recording listener for q on n, failing the test on error.
func listen[T any](x *X, rec *txmqtest.Recorder[T], q *txmq.Queue[T], n *txmq.Node, fn func(ctx context.Context, msgs []T) error) {
	x.T.Helper()
	if err := rec.Listen(q, n, fn); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// publishKeys publishes count messages keyed prefix-i on n, perCall messages per PublishMany
// call, and returns the keys.
func publishKeys(x *X, q *txmq.Queue[Msg], n *txmq.Node, prefix string, count, perCall int, opts ...txmq.PublishOption) []string {
	x.T.Helper()
	return publishKeysCtx(context.Background(), x, q, n, prefix, count, perCall, opts...)
}

// publishKeysCtx is publishKeys with ctx (which may carry a transaction).
func publishKeysCtx(ctx context.Context, x *X, q *txmq.Queue[Msg], n *txmq.Node, prefix string, count, perCall int, opts ...txmq.PublishOption) []string {
	x.T.Helper()
	keys := make([]string, 0, count)
	batch := make([]Msg, 0, perCall)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := q.PublishMany(ctx, n, batch, opts...); err != nil {
			x.T.Fatalf("PublishMany on %q: %v", q.Name(), err)
		}
		batch = batch[:0]
	}
	for i := range count {
		k := fmt.Sprintf("%s-%d", prefix, i)
		keys = append(keys, k)
		batch = append(batch, Msg{K: k})
		if len(batch) == perCall {
			flush()
		}
	}
	flush()
	return keys
}

// waitDelivered waits until rec has every key.
func waitDelivered[T any](x *X, rec *txmqtest.Recorder[T], keys []string) {
	x.T.Helper()
	x.progressing(func() bool { return rec.HasAll(keys) }, func() any { return rec.Runs() }, func() string {
		missing, _ := rec.Diff(keys)
		return fmt.Sprintf("every message delivered: %d of %d missing (first: %s); %s", len(missing), len(keys), first(missing), rec.Summary())
	})
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

// assertSame fails unless rec's delivered set is exactly keys.
func assertSame[T any](x *X, rec *txmqtest.Recorder[T], keys []string) {
	x.T.Helper()
	missing, extra := rec.Diff(keys)
	if len(missing) > 0 || len(extra) > 0 {
		x.T.Fatalf("delivered set differs from published set: %d missing (%s), %d spurious (%s)", len(missing), strings.Join(limit(missing, 5), " "), len(extra), strings.Join(limit(extra, 5), " "))
	}
}

func limit(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// idle waits for the nodes to be idle (two consecutive observations).
func (x *X) idle(nodes ...*txmq.Node) {
	x.T.Helper()
	txmqtest.WaitIdle(x.T, nodes...)
}

// sleep waits d; used only to give wrong behaviour (a redelivery, a spurious batch) a chance
// to show, never as an assertion.
func sleep(d time.Duration) { time.Sleep(d) }

// sumDropped adds the nodes' Dropped counters for reason.
func sumDropped(reason string, nodes ...*txmq.Node) int64 {
	var n int64
	for _, nd := range nodes {
		n += nd.Stats().Dropped[reason]
	}
	return n
}

// checkRuns fails the property unless the listener ran want times, or more by at most one run
// per lease the nodes lost: a run whose lease was lost (the node fenced itself, or the backend
// refused its settle) is not settled and its batch runs again, as at-least-once allows. A
// machine too loaded to extend a lease in time loses one; the properties that count runs give
// their nodes a long lease (steadyLease) so that it is rare, and this check explains the
// extra runs. (Their other checks may still see a lost lease: a batch redelivered past its
// budget is dead-lettered as worker_lost.) rule says what want is, in the failure.
func checkRuns(x *X, got, want int, rule string, nodes ...*txmq.Node) {
	x.T.Helper()
	var lost int64
	for _, n := range nodes {
		lost += n.Stats().LeaseLost
	}
	if got < want || int64(got) > int64(want)+lost {
		x.T.Fatalf("listener ran %d times; want %s: %d (and at most one more per lost lease: the nodes lost %d)", got, rule, want, lost)
	}
	if got > want {
		x.T.Logf("listener ran %d times, %d more than %s: the nodes lost %d leases (a loaded machine), and those runs ran again", got, got-want, rule, lost)
	}
}
