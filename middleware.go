package txmq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/debug"
	"sync/atomic"
	"unicode/utf8"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"
)

// RunRequest is one run of a batch as a run middleware sees it (see RunMiddleware): the
// stored form of its messages, before they are decoded into the queue's type. A middleware may
// replace Payloads (decrypt them, for example) and Headers before it calls next; the
// messages the listener gets are Payloads as next receives them, decoded.
type RunRequest struct {
	// Queue is the queue name.
	Queue string
	// BatchID is the batch id.
	BatchID string
	// MessageIDs are the ids of the batch's messages, in order (MessageIDs).
	MessageIDs []string
	// Attempt is the run number, 1 for the first run, counted as the retry budget counts it.
	Attempt int
	// Key is the ordering key of an Ordered queue's batch, empty otherwise.
	Key string
	// Headers holds each message's headers, in order, nil for a message without; the
	// listener reads them with MessageHeaders. The maps are the run's own: a middleware may
	// change them.
	Headers []map[string]string
	// Payloads holds each message's JSON as it was stored (as the publish middleware left
	// it), in order. A middleware may replace them, keeping one per message (and one Headers
	// entry per message); each must then decode into the queue's type, or the run fails with
	// a Permanent error wrapping ErrUndecodable.
	Payloads []json.RawMessage

	decode func(ctx context.Context, r *RunRequest) error // the innermost handler's work
}

// RunHandler runs a batch: the listener, or the next middleware in the chain.
type RunHandler func(ctx context.Context, r *RunRequest) error

// RunMiddleware wraps the run of every batch of a queue, like net/http middleware wraps a
// handler: it gets next and returns the handler to call instead. The returned handler may
// change ctx (a tenant, a logger), r's Payloads and Headers, and the error; it should call
// next once (not calling it skips the listener, and the run counts as the returned error
// says). Its panic fails the run like a listener's (a *PanicError). Node middleware
// (NodeOptions.RunMiddleware) wraps queue middleware (QueueConfig.RunMiddleware), and within
// each the first of the slice is the outermost. See "Middleware and headers" in the package
// doc.
type RunMiddleware func(next RunHandler) RunHandler

// PublishRequest is one publish call as a publish middleware sees it (see PublishMiddleware):
// the messages encoded, before they are routed (buffer, transaction, outbox).
type PublishRequest struct {
	// Queue is the queue name.
	Queue string
	// Key is the call's ordering key (an Ordered queue), empty otherwise.
	Key string
	// MessageIDs are the ids of the call's messages, in order (generated, or given with
	// ID/IDs). Read only.
	MessageIDs []string
	// Headers holds each message's headers, in order, nil for none: the call's Headers
	// option gives each message a copy of its map. A middleware may change them.
	Headers []map[string]string
	// Payloads holds each message's JSON, in order. A middleware may replace them (encrypt
	// them, for example) with any valid JSON value each (a base64 string); there must be one
	// per message, and each is checked against the size limits after the chain.
	Payloads []json.RawMessage
}

// PublishHandler publishes the messages of a call: the node's routing, or the next
// middleware in the chain.
type PublishHandler func(ctx context.Context, p *PublishRequest) error

// PublishMiddleware wraps every publish call of a queue: it gets next and returns the
// handler to call instead. It runs once per Publish/PublishMany call, on the caller's
// goroutine, before the call is routed, and must pass on ctx (or a child of it): the
// transaction of RunInTx/WithTx travels in it. Returning an error without calling next
// publishes nothing of the call and returns the error to the caller. Node middleware
// (NodeOptions.PublishMiddleware) wraps queue middleware (QueueConfig.PublishMiddleware), the
// first of each slice outermost. See "Middleware and headers" in the package doc.
type PublishMiddleware func(next PublishHandler) PublishHandler

// MaxHeaderBytes bounds the headers of one message: the sum of its keys' and values' lengths.
const MaxHeaderBytes = 8 << 10

// Headers gives every message of a publish call the headers h (string keys and values, for
// example a tenant or a content type). They travel with each message in its batch, through
// the buffer, the outbox, retries, dead letters and their replay, a drain and the ledger's
// copy of the batch, and the listener reads them with MessageHeaders. The map is copied; nil
// or empty means none. A key is a non-empty string, keys and values are valid UTF-8, and a
// message's headers hold at most MaxHeaderBytes.
func Headers(h map[string]string) PublishOption {
	var c map[string]string
	if len(h) > 0 {
		c = maps.Clone(h)
	}
	return func(o *publishOptions) { o.headers = c }
}

// MessageHeaders returns the headers of the messages a listener received with ctx, one map
// per message in the order of its slice (empty, nil or not, for a message without), as the
// run middleware left them; nil when no message of the batch has headers or ctx is not a
// listener's. The maps must not be changed.
func MessageHeaders(ctx context.Context) []map[string]string {
	hs, _ := ctx.Value(headersKey{}).([]map[string]string)
	return hs
}

// headersKey is the context key of a run's headers.
type headersKey struct{}

// withHeaders returns ctx carrying hs when some message has headers, else ctx itself.
func withHeaders(ctx context.Context, hs []map[string]string) context.Context {
	for _, h := range hs {
		if len(h) > 0 {
			return context.WithValue(ctx, headersKey{}, hs)
		}
	}
	return ctx
}

// checkHeaders checks the headers of message i of a publish on queue.
func checkHeaders(queue string, i int, h map[string]string) error {
	size := 0
	for k, v := range h {
		switch {
		case k == "":
			return fmt.Errorf("%w: queue %q, message %d: a header key is empty; use a non-empty name", core.ErrInvalidPayload, queue, i)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return fmt.Errorf("%w: queue %q, message %d: header %q is not valid UTF-8; encode binary values (base64)", core.ErrInvalidPayload, queue, i, envelope.Truncate([]byte(k), 40))
		}
		size += len(k) + len(v)
	}
	if size > MaxHeaderBytes {
		return fmt.Errorf("%w: queue %q, message %d: its headers hold %d bytes, more than MaxHeaderBytes (%d); keep large data in the payload", core.ErrInvalidPayload, queue, i, size, MaxHeaderBytes)
	}
	return nil
}

// publishChain returns the publish middleware of node n and queue q composed around final,
// or final itself when there is none.
func publishChain(node, queue []PublishMiddleware, final PublishHandler) PublishHandler {
	h := final
	for i := len(queue) - 1; i >= 0; i-- {
		h = queue[i](h)
	}
	for i := len(node) - 1; i >= 0; i-- {
		h = node[i](h)
	}
	return h
}

// publishThrough runs a publish call's encoded messages through the publish middleware, then
// final with the messages as the chain left them (headers checked, payloads valid compact
// JSON). It is only called when there is middleware.
func publishThrough(ctx context.Context, n *Node, spec *queueSpec, key string, msgs []core.Message, final func(ctx context.Context, msgs []core.Message) error) (err error) {
	req := &PublishRequest{Queue: spec.Name, Key: key, MessageIDs: make([]string, len(msgs)),
		Headers: make([]map[string]string, len(msgs)), Payloads: make([]json.RawMessage, len(msgs))}
	for i, m := range msgs {
		req.MessageIDs[i], req.Payloads[i] = m.ID, m.Body
		if m.Headers != nil {
			req.Headers[i] = maps.Clone(m.Headers)
		}
	}
	ids := req.MessageIDs
	h := publishChain(n.opts.PublishMiddleware, spec.publishMW, func(ctx context.Context, p *PublishRequest) error {
		if len(p.Payloads) != len(msgs) || len(p.Headers) != len(msgs) {
			return fmt.Errorf("%w: queue %q: publish middleware left %d payloads and %d header entries for %d messages; keep one of each per message", core.ErrInvalidPayload, spec.Name, len(p.Payloads), len(p.Headers), len(msgs))
		}
		out := make([]core.Message, len(msgs))
		for i := range msgs {
			body, err := compactJSON(p.Payloads[i])
			if err != nil {
				return fmt.Errorf("%w: queue %q, message %d: publish middleware left a payload that is not JSON (%v): encode bytes as a JSON string (base64)", core.ErrInvalidPayload, spec.Name, i, err)
			}
			if err := checkHeaders(spec.Name, i, p.Headers[i]); err != nil {
				return err
			}
			var hs map[string]string
			if len(p.Headers[i]) > 0 {
				hs = p.Headers[i]
			}
			out[i] = core.Message{ID: ids[i], Body: body, Headers: hs, Unique: msgs[i].Unique} // the key as the app published it
		}
		return final(ctx, out)
	})
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("txmq: queue %q: publish middleware panicked: %v\n%s", spec.Name, r, debug.Stack())
		}
	}()
	return h(ctx, req)
}

// compactJSON returns b when it is valid compact JSON, a compacted copy when it is valid, and
// an error otherwise.
func compactJSON(b []byte) (json.RawMessage, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty payload")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	if bytes.Equal(buf.Bytes(), b) {
		return b, nil
	}
	return buf.Bytes(), nil
}

// runChain returns the run middleware of the node and the queue composed around the decode
// and listener step.
func runChain(node, queue []RunMiddleware) RunHandler {
	h := RunHandler(func(ctx context.Context, r *RunRequest) error { return r.decode(ctx, r) })
	for i := len(queue) - 1; i >= 0; i-- {
		h = queue[i](h)
	}
	for i := len(node) - 1; i >= 0; i-- {
		h = node[i](h)
	}
	return h
}

// mwBatch is a decoded batch of a Queue[T] with run middleware: its envelope keeps the
// messages raw, and each run decodes them after the chain (typedBatch is the batch without).
type mwBatch[T any] struct {
	engine.Batch
	env   envelope.Typed[json.RawMessage]
	one   [1]json.RawMessage
	chain RunHandler
	fn    func(ctx context.Context, msgs []T) error
	onErr func([]T, error, int) error
	msgs  atomic.Pointer[[]T] // as the last run on this node decoded them, for OnError
}

// listenWithMiddleware returns the engine listener of q on n when run middleware applies.
func (q *Queue[T]) listenWithMiddleware(n *Node, fn func(ctx context.Context, msgs []T) error) *engine.Listener {
	chain := runChain(n.opts.RunMiddleware, q.spec.runMW)
	return &engine.Listener{Spec: &q.spec.Spec, Decode: func(body []byte, id string) (*engine.Batch, error) {
		b := &mwBatch[T]{chain: chain, fn: fn, onErr: q.onError}
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
}

// Run runs the middleware chain around the decode and the listener, turning a panic into a
// *PanicError.
func (b *mwBatch[T]) Run(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	env := &b.env
	deliveries, _ := engine.Deliveries(ctx)
	r := &RunRequest{Queue: env.Queue, BatchID: env.ID, MessageIDs: env.MessageIDs.IDs(), Attempt: env.Attempt + deliveries,
		Key: env.Key, Headers: make([]map[string]string, len(env.Messages)), Payloads: append([]json.RawMessage(nil), env.Messages...),
		decode: b.decode}
	for i := range r.Headers {
		if h := env.MessageHeaders(i); h != nil {
			r.Headers[i] = maps.Clone(h)
		}
	}
	return b.chain(ctx, r)
}

// decode is the innermost step of the chain: decode r's payloads into T and run the listener
// with r's headers in ctx.
func (b *mwBatch[T]) decode(ctx context.Context, r *RunRequest) error {
	if n := len(b.env.Messages); len(r.Payloads) != n || len(r.Headers) != n {
		return Permanent(fmt.Errorf("%w: queue %q, batch %s: run middleware left %d payloads and %d header entries for %d messages; keep one of each per message",
			core.ErrUndecodable, r.Queue, r.BatchID, len(r.Payloads), len(r.Headers), n))
	}
	msgs := make([]T, len(r.Payloads))
	for i, p := range r.Payloads {
		if err := json.Unmarshal(p, &msgs[i]); err != nil {
			return Permanent(fmt.Errorf("%w: queue %q, batch %s, message %d does not decode into %T after the run middleware: %v (payload %s)",
				core.ErrUndecodable, r.Queue, r.BatchID, i, msgs[i], err, envelope.Truncate(p, 40)))
		}
	}
	b.msgs.Store(&msgs)
	return b.fn(withHeaders(ctx, r.Headers), msgs)
}

// OnError calls the queue's OnError, if any, with the messages as the last run on this node
// decoded them (nil when no run here got that far: the middleware failed, or the batch was
// dropped without a run).
func (b *mwBatch[T]) OnError(err error, attempts int) error {
	if b.onErr == nil {
		return nil
	}
	var msgs []T
	if p := b.msgs.Load(); p != nil {
		msgs = *p
	}
	return b.onErr(msgs, err, attempts)
}
