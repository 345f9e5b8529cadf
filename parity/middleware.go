package parity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

// The middleware group: run and publish middleware wrap in their documented order (node
// outside queue, the first of a slice outermost), and a message's headers reach its
// listener unchanged on every path: direct publish (coalesced with other calls' messages),
// ordered keys, a delay, retries, the outbox (middleware_paths.go), a dead letter and its
// replay, ledger mode's republish, with payload encryption written as middleware whose
// plaintext the backend never holds.

func init() {
	register("middleware",
		property{name: "order_node_outer_queue_inner", run: mwOrder},
		property{name: "publish_middleware_error_publishes_nothing", run: mwPublishRefused},
		property{name: "headers_per_message_direct", dup: true, run: mwHeadersDirect},
		property{name: "headers_ordered_keys", dup: true, run: mwHeadersOrdered},
		property{name: "headers_delayed_publish", run: mwHeadersDelayed},
		property{name: "headers_and_attempt_through_retries", run: mwRetries},
	)
}

// mwOrder: two node run middleware wrap two queue run middleware, which wrap the listener,
// the first of each slice outermost; the same for publish middleware. A header each publish
// middleware adds reaches the listener, a ctx value the outer run middleware sets reaches it,
// and the RunRequest names the queue, the batch, the ids and run 1.
func mwOrder(x *X) {
	var (
		mu      sync.Mutex
		trace   []string
		request *txmq.RunRequest
	)
	note := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	type ctxKey struct{}
	runMW := func(name string) txmq.RunMiddleware {
		return func(next txmq.RunHandler) txmq.RunHandler {
			return func(ctx context.Context, r *txmq.RunRequest) error {
				note("run " + name + ">")
				if name == "n1" {
					ctx = context.WithValue(ctx, ctxKey{}, "from n1")
					mu.Lock()
					c := *r
					request = &c
					mu.Unlock()
				}
				err := next(ctx, r)
				note("run <" + name)
				return err
			}
		}
	}
	pubMW := func(name string) txmq.PublishMiddleware {
		return func(next txmq.PublishHandler) txmq.PublishHandler {
			return func(ctx context.Context, p *txmq.PublishRequest) error {
				note("publish " + name + ">")
				for i := range p.Headers {
					if p.Headers[i] == nil {
						p.Headers[i] = map[string]string{}
					}
					p.Headers[i]["trail"] += "/" + name
				}
				err := next(ctx, p)
				note("publish <" + name)
				return err
			}
		}
	}
	q := declare(x, txmq.QueueConfig[Msg]{
		RunMiddleware:     []txmq.RunMiddleware{runMW("q1"), runMW("q2")},
		PublishMiddleware: []txmq.PublishMiddleware{pubMW("q1")},
	})
	n := x.node(txmq.NodeOptions{
		RunMiddleware:     []txmq.RunMiddleware{runMW("n1"), runMW("n2")},
		PublishMiddleware: []txmq.PublishMiddleware{pubMW("n1"), pubMW("n2")},
	})
	rec := newRecorder()
	var gotCtx any
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(func(ctx context.Context, _ []Msg) error {
		note("listener")
		mu.Lock()
		gotCtx = ctx.Value(ctxKey{})
		mu.Unlock()
		return nil
	}))
	id := "order-" + q.Name()
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.ID(id), txmq.Headers(map[string]string{"trail": "caller"})); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitDelivered(x, rec, []string{"a"})
	x.idle(n)
	want := []string{
		"publish n1>", "publish n2>", "publish q1>", "publish <q1", "publish <n2", "publish <n1",
		"run n1>", "run n2>", "run q1>", "run q2>", "listener", "run <q2", "run <q1", "run <n2", "run <n1",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(trace, want) {
		x.T.Fatalf("middleware ran in the order\n  %s\nwant\n  %s", strings.Join(trace, ", "), strings.Join(want, ", "))
	}
	hl.check(x, "a", map[string]string{"trail": "caller/n1/n2/q1"}, 1)
	if gotCtx != "from n1" {
		x.T.Fatalf("the listener's ctx value is %v; want the one the node's run middleware set", gotCtx)
	}
	if request == nil || request.Queue != q.Name() || request.BatchID == "" || !slices.Equal(request.MessageIDs, []string{id}) || request.Attempt != 1 || len(request.Payloads) != 1 {
		x.T.Fatalf("RunRequest %+v; want queue %s, a batch id, ids [%s], attempt 1 and one payload", request, q.Name(), id)
	}
}

// mwPublishRefused: a publish middleware that returns an error without calling next fails
// the call with its error, and nothing of the call is delivered; a later call it lets
// through is.
func mwPublishRefused(x *X) {
	errNo := errors.New("parity: refused by middleware")
	q := declare(x, txmq.QueueConfig[Msg]{PublishMiddleware: []txmq.PublishMiddleware{func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			if p.Headers[0]["refuse"] != "" {
				return errNo
			}
			return next(ctx, p)
		}
	}}})
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	listen(x, rec, q, n, nil)
	err := q.PublishMany(context.Background(), n, []Msg{{K: "no-1"}, {K: "no-2"}}, txmq.Headers(map[string]string{"refuse": "yes"}))
	if !errors.Is(err, errNo) {
		x.T.Fatalf("PublishMany through a refusing middleware: %v; want its error", err)
	}
	keys := publishKeys(x, q, n, "yes-"+q.Name(), 3, 3)
	waitDelivered(x, rec, keys)
	x.idle(n)
	sleep(x.Caps.PollWait)
	assertSame(x, rec, keys)
}

// mwHeadersDirect: the messages of several publish calls, with different headers, none, and
// several messages sharing one call's headers, coalesce into batches; every message reaches
// the listener with its own headers, in every run (under duplicate delivery too).
func mwHeadersDirect(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 7})
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(nil))
	want := map[string]map[string]string{}
	var keys []string
	for call := range 12 {
		headers := func() map[string]string {
			if call%3 == 2 { // every third call has none
				return nil
			}
			return map[string]string{"call": fmt.Sprint(call), "tenant": fmt.Sprintf("t%d", call%2), "quote\"<&>": "ünï\u2028"}
		}
		msgs := []Msg{{K: fmt.Sprintf("c%d-0", call)}, {K: fmt.Sprintf("c%d-1", call)}}
		for _, m := range msgs {
			want[m.K], keys = headers(), append(keys, m.K)
		}
		h := headers()
		if err := q.PublishMany(context.Background(), n, msgs, txmq.Headers(h)); err != nil {
			x.T.Fatalf("PublishMany: %v", err)
		}
		if h != nil {
			h["call"] = "changed after the call" // Headers copies the map
		}
	}
	waitDelivered(x, rec, keys)
	x.eventually(func() bool { return rec.MinCount(keys) >= x.copies() }, "every copy delivered")
	x.idle(n)
	for _, k := range keys {
		hl.check(x, k, want[k], x.copies())
	}
}

// mwHeadersOrdered: on an Ordered queue, each key's messages carry their own headers and the
// RunRequest names the batch's key; every message of a run has the run's key in its header.
func mwHeadersOrdered(x *X) {
	x.needOrdering()
	var (
		mu  sync.Mutex
		bad []string
	)
	q := declare(x, txmq.QueueConfig[Msg]{Ordered: true, RunMiddleware: []txmq.RunMiddleware{func(next txmq.RunHandler) txmq.RunHandler {
		return func(ctx context.Context, r *txmq.RunRequest) error {
			for i, h := range r.Headers {
				if h["key"] != r.Key {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("batch of key %q: message %s has header key %q", r.Key, r.MessageIDs[i], h["key"]))
					mu.Unlock()
				}
			}
			return next(ctx, r)
		}
	}}})
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(nil))
	want := map[string]map[string]string{}
	var keys []string
	for i := range 6 {
		for _, key := range []string{"k1", "k2"} {
			k := fmt.Sprintf("%s-%d", key, i)
			h := map[string]string{"key": key, "seq": fmt.Sprint(i)}
			want[k], keys = h, append(keys, k)
			if err := q.Publish(context.Background(), n, Msg{K: k}, txmq.Key(key), txmq.Headers(h)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	waitDelivered(x, rec, keys)
	x.eventually(func() bool { return rec.MinCount(keys) >= x.copies() }, "every copy delivered")
	x.idle(n)
	for _, k := range keys {
		hl.check(x, k, want[k], x.copies())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		x.T.Fatalf("headers of another key in a batch: %s", strings.Join(limit(bad, 3), "; "))
	}
}

// mwHeadersDelayed: a delayed publish's headers arrive with it, not before its due time.
func mwHeadersDelayed(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(nil))
	delay := 500 * time.Millisecond
	start := time.Now()
	h := map[string]string{"delayed": "yes"}
	if err := q.Publish(context.Background(), n, Msg{K: "late"}, txmq.After(delay), txmq.Headers(h)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitDelivered(x, rec, []string{"late"})
	if early := rec.FirstSeen("late").Sub(start); early < delay {
		x.T.Fatalf("delivered %v after the publish; due after %v", early, delay)
	}
	x.idle(n)
	hl.check(x, "late", h, 1)
}

// mwRetries: a batch that fails twice runs three times with the same headers, and its run
// middleware sees the attempts 1, 2 and 3.
func mwRetries(x *X) {
	var (
		mu       sync.Mutex
		attempts []int
	)
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 3, Backoff: func(int) time.Duration { return 50 * time.Millisecond },
		RunMiddleware: []txmq.RunMiddleware{func(next txmq.RunHandler) txmq.RunHandler {
			return func(ctx context.Context, r *txmq.RunRequest) error {
				mu.Lock()
				attempts = append(attempts, r.Attempt)
				mu.Unlock()
				return next(ctx, r)
			}
		}}})
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(func(context.Context, []Msg) error {
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 3 {
			return errors.New("parity: failing until the third run")
		}
		return nil
	}))
	h := map[string]string{"retry": "kept"}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "r1"}, {K: "r2"}}, txmq.Headers(h)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	x.eventually(func() bool { return hl.count("r1") >= 3 && hl.count("r2") >= 3 }, "three runs")
	x.idle(n)
	hl.check(x, "r1", h, 3)
	hl.check(x, "r2", h, 3)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(attempts, []int{1, 2, 3}) {
		x.T.Fatalf("run middleware saw attempts %v; want [1 2 3]", attempts)
	}
}
