package txmq

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"
)

// Queue is a declared, typed queue. Messages are JSON-encoded once at publish and decoded once at
// delivery. Get one from Declare or MustDeclare.
type Queue[T any] struct {
	spec    *queueSpec
	onError func([]T, error, int) error
	// plain caches roundTripsPlainly of T: 0 not known yet, 1 true, 2 false (a publish call
	// per message at one message per batch asked the shared cache each time).
	plain atomic.Int32
}

// roundTrips reports whether T round-trips plainly (roundTripsPlainly), cached in q.
func (q *Queue[T]) roundTrips() bool {
	switch q.plain.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	ok := roundTripsPlainly(reflect.TypeFor[T]())
	v := int32(2)
	if ok {
		v = 1
	}
	q.plain.Store(v)
	return ok
}

// Name returns the queue name.
func (q *Queue[T]) Name() string { return q.spec.Name }

// PublishOption changes one publish call.
type PublishOption func(*publishOptions)

type publishOptions struct {
	notBefore time.Time
	delay     time.Duration
	ids       []string
	key       string
	keySet    bool
	priority  int
	prioSet   bool
	fairKey   string
	fairSet   bool
	uniqueKey string
	uniqueSet bool
	tick      bool // a schedule's tick (see scheduleTick)
	headers   map[string]string
}

// MaxIDBytes is the longest message id a publish accepts.
const MaxIDBytes = 255

// ID gives the message of a Publish call its id instead of a generated one: for example the
// business row's key, so that a listener (MessageIDs) and an operator can tell which message
// is which. See IDs.
func ID(id string) PublishOption { return IDs(id) }

// IDs gives the messages of a publish call their ids, in order, one per message, instead of
// generated ones. An id is 1 to MaxIDBytes bytes of UTF-8 without control characters, and the
// ids of one call are distinct. The id travels with the message through retries, the outbox,
// a drain and a dead letter's replay, and listeners read it with MessageIDs. On a queue with
// an IDDedupWindow, an id already published to the queue within the window is accepted once
// (the repeat is left out, not an error); without one, publishing an id twice delivers twice.
// A dead letter's replay is never deduplicated.
func IDs(ids ...string) PublishOption {
	return func(o *publishOptions) { o.ids = ids }
}

// Key gives the messages of a publish call the ordering key of an Ordered queue: messages of
// one key are delivered in the order of their publish calls (see "Ordering" in the package
// doc). A key is 1 to core.MaxKeyBytes (128) bytes of printable ASCII without spaces, the same
// on every backend (SQS's MessageGroupId set); hash longer keys. On a queue that is not
// Ordered, a key is an error: declare the queue Ordered.
func Key(key string) PublishOption {
	return func(o *publishOptions) { o.key, o.keySet = key, true }
}

// After delays delivery by d: the messages are never delivered before now+d.
func After(d time.Duration) PublishOption {
	return func(o *publishOptions) { o.delay = d }
}

// At schedules delivery: the messages are never delivered before t.
func At(t time.Time) PublishOption {
	return func(o *publishOptions) { o.notBefore = t }
}

// Publish publishes one message; see PublishMany.
func (q *Queue[T]) Publish(ctx context.Context, n *Node, msg T, opts ...PublishOption) error {
	return q.PublishMany(ctx, n, []T{msg}, opts...)
}

// PublishMany publishes messages on node n, routed by the queue's Transactional setting and the
// transaction in ctx (see ContextWithTx). Every message must survive a JSON round trip; a
// message that does not is an error wrapping ErrInvalidPayload, and nothing of the call is
// published. The call never waits for the backend: immediate messages go to the node's
// coalescing buffer. There is no backpressure: the buffer is unbounded, so a publisher that
// outruns the backend for long (or a backend that is down without an outbox to hand off to)
// grows memory; watch Stats.Buffered and throttle in the app if that can happen.
func (q *Queue[T]) PublishMany(ctx context.Context, n *Node, msgs []T, opts ...PublishOption) error {
	if n == nil {
		return fmt.Errorf("%w: queue %q: publish needs a node (NewNode)", core.ErrInvalidConfig, q.spec.Name)
	}
	if len(msgs) == 0 {
		return nil
	}
	o := applyPublishOptions(opts)
	if err := checkKey(q.spec, o); err != nil {
		return err
	}
	prio, err := publishPriority(q.spec, o)
	if err != nil {
		return err
	}
	fair, err := publishFairKey(q.spec, o)
	if err != nil {
		return err
	}
	due := o.notBefore
	if o.delay > 0 {
		due = n.eng.Clock().Now().Add(o.delay)
	}
	// A one-message call (Publish) allocates its Pending, its message list and the engine's
	// data about it together.
	var one *engine.OnePublish
	var encoded []core.Message
	if len(msgs) == 1 {
		one = new(engine.OnePublish)
		encoded = one.Msgs[:]
	} else {
		encoded = make([]core.Message, len(msgs))
	}
	if err := encodeMessages(q.spec, msgs, encoded, !q.roundTrips()); err != nil {
		return err
	}
	if o.ids != nil {
		if err := setIDs(q.spec.Name, encoded, o.ids); err != nil {
			return err
		}
	}
	if due, err = setUnique(q.spec, o, encoded, due, n.eng.Clock().Now); err != nil {
		return err
	}
	if o.headers != nil {
		if err := checkHeaders(q.spec.Name, 0, o.headers); err != nil {
			return err
		}
		for i := range encoded {
			encoded[i].Headers = o.headers
		}
	}
	flags := engine.PublishFlags{CallerIDs: o.ids != nil, Tick: o.tick}
	if len(n.opts.PublishMiddleware) > 0 || len(q.spec.publishMW) > 0 {
		key := o.key // the closure captures a string, not the options (which would escape)
		return publishThrough(ctx, n, q.spec, key, encoded, func(ctx context.Context, msgs []core.Message) error {
			return n.eng.Publish(ctx, &q.spec.Spec, &core.Pending{Queue: q.spec.Name, Messages: msgs, NotBefore: due, Key: key, Priority: prio, FairKey: fair}, flags)
		})
	}
	// The Pending is built where it lives: a local whose address is taken escaped, an
	// allocation per Publish on top of the OnePublish that holds it.
	if one != nil {
		one.Pending = core.Pending{Queue: q.spec.Name, Messages: encoded, NotBefore: due, Key: o.key, Priority: prio, FairKey: fair}
		return n.eng.PublishOne(ctx, &q.spec.Spec, one, flags)
	}
	return n.eng.Publish(ctx, &q.spec.Spec, &core.Pending{Queue: q.spec.Name, Messages: encoded, NotBefore: due, Key: o.key, Priority: prio, FairKey: fair}, flags)
}

// applyPublishOptions returns the options of a publish call. A call without options gets the
// zero value without an allocation: applying an option takes the options' address, which
// escapes (an option is a func), so only a call that has options pays for it.
func applyPublishOptions(opts []PublishOption) publishOptions {
	if len(opts) == 0 {
		return publishOptions{}
	}
	o := new(publishOptions)
	for _, opt := range opts {
		opt(o)
	}
	return *o
}

// checkKey checks a publish call's ordering key against the queue's Ordered setting.
func checkKey(spec *queueSpec, o publishOptions) error {
	switch {
	case spec.Ordered && !o.keySet:
		return fmt.Errorf("%w: queue %q is Ordered: every publish needs an ordering key; pass txmq.Key(k) (for example the account or order id)", core.ErrInvalidConfig, spec.Name)
	case !spec.Ordered && o.keySet:
		return fmt.Errorf("%w: queue %q is not Ordered, so txmq.Key(%q) would promise an order it does not keep; declare the queue with Ordered: true, or drop the key", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.key), 40))
	case spec.Ordered && !core.ValidKey(o.key):
		return fmt.Errorf("%w: queue %q: ordering key %q is not 1 to %d bytes of printable ASCII without spaces; hash it (for example hex of SHA-256) to make it portable", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.key), 40), core.MaxKeyBytes)
	}
	return nil
}

// encodeMessages encodes each message into out (as long as msgs) and, when check is set (T
// may not round-trip plainly), checks its JSON round trip. Values are kept boxed only when
// the queue has a Dedup func that needs them.
func encodeMessages[T any](spec *queueSpec, msgs []T, out []core.Message, check bool) error {
	for i := range msgs {
		b, err := json.Marshal(msgs[i])
		if err != nil {
			return fmt.Errorf("%w: queue %q, message %d: %v: publish only values that encoding/json can encode (no channels, funcs, NaN/Inf or cycles)", core.ErrInvalidPayload, spec.Name, i, err)
		}
		if check {
			var back T
			if err := json.Unmarshal(b, &back); err != nil {
				return fmt.Errorf("%w: queue %q, message %d: its JSON %s does not decode back into %T: %v", core.ErrInvalidPayload, spec.Name, i, envelope.Truncate(b, 80), back, err)
			}
		}
		out[i] = core.Message{ID: core.NewID(), Body: b}
	}
	return nil
}

// typedDedup adapts a typed Dedup func to encoded messages. Output messages keep the id and
// headers of the first input message with the same JSON; new values get new ids and no headers.
func typedDedup[T any](name string, fn func([]T) []T) func([]core.Message) ([]core.Message, error) {
	return func(in []core.Message) (out []core.Message, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("queue %q: Dedup panicked: %v", name, r)
			}
		}()
		vals := make([]T, 0, len(in))
		ids := make(map[string]core.Message, len(in))
		for _, m := range in {
			var v T
			if err := json.Unmarshal(m.Body, &v); err != nil {
				return nil, fmt.Errorf("queue %q: decoding for Dedup: %w", name, err)
			}
			vals = append(vals, v)
			if _, seen := ids[string(m.Body)]; !seen {
				ids[string(m.Body)] = m
			}
		}
		kept := fn(vals)
		if len(kept) > len(in) {
			return nil, fmt.Errorf("queue %q: Dedup returned %d messages for %d: it may only remove or merge", name, len(kept), len(in))
		}
		out = make([]core.Message, 0, len(kept))
		for i := range kept {
			b, err := json.Marshal(kept[i])
			if err != nil {
				return nil, fmt.Errorf("queue %q: encoding Dedup output: %w", name, err)
			}
			first, ok := ids[string(b)]
			if ok {
				delete(ids, string(b))
			} else {
				first = core.Message{ID: core.NewID()}
			}
			out = append(out, core.Message{ID: first.ID, Body: b, Headers: first.Headers})
		}
		return out, nil
	}
}

// Listen registers fn as this node's listener for q. A node has at most one listener per queue,
// and the queue must be declared in the node's registry. Listeners receive a slice of messages
// (any size: MaxBatchMessages is a soft target), may be called concurrently, must be idempotent
// (delivery is at-least-once) and must not rely on order, except within a key of an Ordered
// queue (a batch then holds one key, in publish order). Returning an error or panicking fails
// the batch, which is retried with backoff until the queue's budget is spent. The context is
// cancelled when the node stops or the batch's lease is lost.
func (q *Queue[T]) Listen(n *Node, fn func(ctx context.Context, msgs []T) error) error {
	if n == nil || fn == nil {
		return fmt.Errorf("%w: queue %q: Listen needs a node and a non-nil listener func", core.ErrInvalidConfig, q.spec.Name)
	}
	if len(n.opts.RunMiddleware) > 0 || len(q.spec.runMW) > 0 {
		return n.eng.Listen(q.listenWithMiddleware(n, fn))
	}
	l := &engine.Listener{Spec: &q.spec.Spec, Decode: func(body []byte, id string) (*engine.Batch, error) {
		// One allocation per claim holds the envelope, the decoded view and the typed calls.
		b := &typedBatch[T]{fn: fn, onErr: q.onError}
		env := &b.env
		if err := envelope.DecodeTypedInto(body, env, q.spec.Name, id, &b.one); err != nil {
			return nil, err
		}
		if env.Queue != q.spec.Name {
			return nil, fmt.Errorf("%w: batch %s names queue %q but was stored in %q", core.ErrUndecodable, env.ID, env.Queue, q.spec.Name)
		}
		b.Batch = engine.Batch{Header: &env.Header, Count: len(env.Messages), Calls: b, HasOnError: q.onError != nil}
		return &b.Batch, nil
	}}
	return n.eng.Listen(l)
}

// typedBatch is a decoded batch of a Queue[T]: the envelope, the untyped view the engine uses
// and the typed calls, in one allocation (a closure per call was two more per claim).
type typedBatch[T any] struct {
	engine.Batch
	env   envelope.Typed[T]
	one   [1]T // the message of a one-message batch (env.Messages)
	fn    func(ctx context.Context, msgs []T) error
	onErr func([]T, error, int) error
}

// Run runs the listener, turning its panic into a *PanicError.
func (b *typedBatch[T]) Run(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	if len(b.env.Headers) > 0 {
		ctx = withHeaders(ctx, b.env.Headers)
	}
	return b.fn(ctx, b.env.Messages)
}

// OnError calls the queue's OnError, if any.
func (b *typedBatch[T]) OnError(err error, attempts int) error {
	if b.onErr == nil {
		return nil
	}
	return b.onErr(b.env.Messages, err, attempts)
}

// PanicError is the failure of a listener that panicked.
type PanicError struct {
	// Value is what the listener panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("txmq: listener panicked: %v", e.Value) }
