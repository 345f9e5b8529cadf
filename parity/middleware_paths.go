package parity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// The middleware group's paths through the app database (the suite's PostgreSQL): the outbox
// of RunInTx, the dead-letter store and its replay, the ledger and ledger mode; and payload
// encryption checked against what the backend itself stores.

func init() {
	register("middleware",
		property{name: "headers_through_outbox_each_routing", run: mwOutbox},
		property{name: "encrypted_dead_letter_replay_with_ledger", run: mwReplay},
		property{name: "encrypted_ledger_mode_republish", run: mwLedgerMode},
		property{name: "headers_stay_with_their_message_after_ledger_cancel", run: mwLedgerCancel},
		property{name: "encryption_backend_never_sees_plaintext", dup: true, run: mwEncryption},
	)
}

// mwOutbox: inside RunInTx, a Require and a Try queue's messages become outbox rows and a
// Never queue's wait for the commit; on each, the publish middleware runs once per call
// (inside the transaction, its ctx carrying it) and every message reaches the listener with
// the caller's headers and the middleware's, and no outbox row is left.
func mwOutbox(x *X) {
	var calls atomic.Int64
	stamp := func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			calls.Add(1)
			for i := range p.Headers {
				p.Headers[i]["via"] = "middleware"
			}
			return next(ctx, p)
		}
	}
	cfg := func(tx txmq.Transactional) txmq.QueueConfig[Msg] {
		return txmq.QueueConfig[Msg]{Transactional: tx, MaxBatchMessages: 3, PublishMiddleware: []txmq.PublishMiddleware{stamp}}
	}
	qs := []*txmq.Queue[Msg]{declare(x, cfg(txmq.Require)), declare(x, cfg(txmq.Try)), declare(x, cfg(txmq.Never))}
	n := x.node(txmq.NodeOptions{})
	rec := newRecorder()
	hl := newHeaderLog()
	for _, q := range qs {
		listen(x, rec, q, n, hl.listener(nil))
	}
	s := x.store(x.rawClient(), outbox.Options{})
	if err := s.Start(x.ctx()); err != nil {
		x.T.Fatalf("outbox Start: %v", err)
	}
	want := map[string]map[string]string{}
	var keys []string
	if err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		for _, q := range qs {
			for call := range 3 {
				msgs := []Msg{{K: fmt.Sprintf("%s-%d-a", q.Name(), call)}, {K: fmt.Sprintf("%s-%d-b", q.Name(), call)}}
				h := map[string]string{"queue": q.Name(), "call": fmt.Sprint(call)}
				for _, m := range msgs {
					want[m.K], keys = map[string]string{"queue": q.Name(), "call": fmt.Sprint(call), "via": "middleware"}, append(keys, m.K)
				}
				if err := q.PublishMany(ctx, n, msgs, txmq.Headers(h)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
	for _, k := range keys {
		hl.check(x, k, want[k], 1)
	}
	if c := calls.Load(); c != 9 {
		x.T.Fatalf("the publish middleware ran %d times for 9 publish calls; want once per call", c)
	}
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after publish")
}

// mwReplay: with a ledger and payload encryption, a batch that fails to its last run is
// dead-lettered sealed (the store's body holds no plaintext, its headers intact); replayed
// from the store, it runs again, decrypted, with the same ids and headers, and the ledger
// follows it from dead to completed.
func mwReplay(x *X) {
	aead := parityAEAD(x)
	lg := x.ledger()
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 2, Backoff: func(int) time.Duration { return 20 * time.Millisecond },
		PublishMiddleware: []txmq.PublishMiddleware{sealPayloads(aead)},
		RunMiddleware:     []txmq.RunMiddleware{openPayloads(aead)}})
	s := x.store(x.rawClient(), outbox.Options{})
	n := x.node(txmq.NodeOptions{Ledger: lg, DeadLetters: s})
	in := n.Inspector()
	var failing atomic.Bool
	failing.Store(true)
	hl := newHeaderLog()
	if err := q.Listen(n, hl.listener(func(context.Context, []Msg) error {
		if failing.Load() {
			return errors.New("parity: fails until replayed")
		}
		return nil
	})); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	secret := "secret-" + q.Name()
	ids := []string{"mw-a/" + q.Name(), "mw-b/" + q.Name()}
	heads := []map[string]string{{"tenant": "a"}, {"tenant": "b"}}
	for i, id := range ids {
		if err := q.Publish(context.Background(), n, Msg{K: id, P: secret}, txmq.ID(id), txmq.Headers(heads[i])); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	for _, id := range ids {
		waitState(x, in, id, core.StateDead)
	}
	dls, err := s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: q.Name()})
	if err != nil || len(dls) == 0 {
		x.T.Fatalf("ListDeadLetters: %d rows, %v; want the dead letters", len(dls), err)
	}
	for _, d := range dls {
		checkSealed(x, "the dead letter", d.Body, secret, nil)
	}
	failing.Store(false)
	for _, d := range dls {
		if err := s.Replay(x.ctx(), d.ID); err != nil {
			x.T.Fatalf("Replay: %v", err)
		}
	}
	for _, id := range ids {
		waitState(x, in, id, core.StateCompleted)
	}
	x.idle(n)
	for i, id := range ids {
		hl.check(x, id, heads[i], 3) // two runs, then the replayed one
	}
}

// mwLedgerMode: a sealed batch with headers that the backend acknowledges and forgets is
// published again from ledger mode's copy, and reaches the listener decrypted with its
// headers.
func mwLedgerMode(x *X) {
	aead := parityAEAD(x)
	lg := x.ledgerModeLedger(2 * time.Second)
	q := declare(x, txmq.QueueConfig[Msg]{})
	be, _ := x.client()
	lossy := newLosing(be, time.Second, q.Name())
	n := x.nodeOn(lossy, txmq.NodeOptions{Ledger: lg,
		PublishMiddleware: []txmq.PublishMiddleware{sealPayloads(aead)},
		RunMiddleware:     []txmq.RunMiddleware{openPayloads(aead)}})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(nil))
	h := map[string]string{"kept": "by the ledger"}
	if err := q.PublishMany(context.Background(), n, []Msg{{K: "l1", P: "secret"}, {K: "l2", P: "secret"}}, txmq.Headers(h)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	x.eventually(func() bool { return lossy.lostCount() >= 1 }, "the lossy backend forgot the first publish")
	waitDelivered(x, rec, []string{"l1", "l2"})
	x.idle(n)
	hl.check(x, "l1", h, 1)
	hl.check(x, "l2", h, 1)
	if v, _ := rec.Value("l1"); v.P != "secret" {
		x.T.Fatalf("the listener got %+v; want the decrypted message", v)
	}
}

// mwLedgerCancel: with a ledger, a message cancelled before its batch runs is left out of
// the batch, and each message left keeps its own headers (the run middleware gives each its
// index: they must not shift onto a neighbour) and its sealed payload opens.
func mwLedgerCancel(x *X) {
	aead := parityAEAD(x)
	lg := x.ledger()
	number := func(next txmq.PublishHandler) txmq.PublishHandler {
		return func(ctx context.Context, p *txmq.PublishRequest) error {
			for i := range p.Headers {
				p.Headers[i] = map[string]string{"index": fmt.Sprint(i)}
			}
			return next(ctx, p)
		}
	}
	q := declare(x, txmq.QueueConfig[Msg]{PublishMiddleware: []txmq.PublishMiddleware{number, sealPayloads(aead)},
		RunMiddleware: []txmq.RunMiddleware{openPayloads(aead)}})
	n := x.node(txmq.NodeOptions{Ledger: lg})
	in := n.Inspector()
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(nil))
	pre := "mwcancel/" + q.Name() + "/"
	keys := []string{"m0", "m1", "m2", "m3"}
	ids := make([]string, len(keys))
	msgs := make([]Msg, len(keys))
	for i, k := range keys {
		ids[i], msgs[i] = pre+k, Msg{K: k}
	}
	if err := q.PublishMany(context.Background(), n, msgs, txmq.IDs(ids...), txmq.After(2*time.Second)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	for _, id := range []string{ids[0], ids[2]} {
		waitState(x, in, id, core.StateDelayed)
		if m, err := in.Cancel(context.Background(), id); err != nil || m.State != core.StateCancelled {
			x.T.Fatalf("Cancel(%s) = %+v, %v; want it cancelled", id, m, err)
		}
	}
	waitDelivered(x, rec, []string{"m1", "m3"})
	waitState(x, in, ids[3], core.StateCompleted)
	x.idle(n)
	hl.check(x, "m1", map[string]string{"index": "1"}, 1)
	hl.check(x, "m3", map[string]string{"index": "3"}, 1)
	for _, k := range []string{"m0", "m2"} {
		if rec.Has(k) {
			x.T.Fatalf("the listener received %s, cancelled before its batch ran", k)
		}
	}
}

// recording is a backend that keeps a copy of every body it is asked to store.
type recording struct {
	core.Backend
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recording) Publish(ctx context.Context, b core.OutgoingBatch) error {
	r.mu.Lock()
	r.bodies = append(r.bodies, append([]byte(nil), b.Body...))
	r.mu.Unlock()
	return r.Backend.Publish(ctx, b)
}

// Unwrap gives the wrapped backend to core's capability checks.
func (r *recording) Unwrap() core.Backend { return r.Backend }

func (r *recording) published() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// mwEncryption: with node publish middleware that seals payloads, every body the node hands
// the backend, the body a raw Fetch reads back from the backend, and the dead letter of a
// batch that fails for good hold no plaintext and carry the headers; a node whose run
// middleware opens them delivers the plaintext messages, each copy under duplicate delivery.
func mwEncryption(x *X) {
	aead := parityAEAD(x)
	// Two runs: the raw Fetch below may count as a delivery that never settled.
	q := declare(x, txmq.QueueConfig[Msg]{MaxAttempts: 2})
	be, _ := x.client()
	spy := &recording{Backend: be}
	pub := x.nodeOn(spy, txmq.NodeOptions{PublishMiddleware: []txmq.PublishMiddleware{sealPayloads(aead)}})
	secret := "plaintext-" + q.Name()
	h := map[string]string{"tenant": "acme"}
	keys := []string{"e1", "e2", "e3", "dead"}
	msgs := make([]Msg, len(keys))
	for i, k := range keys {
		msgs[i] = Msg{K: k, P: secret}
	}
	if err := q.PublishMany(context.Background(), pub, msgs, txmq.Headers(h)); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	x.eventually(func() bool { return len(spy.published()) > 0 }, "the publishing node flushed")
	for _, b := range spy.published() {
		checkSealed(x, "a published body", b, secret, h)
	}
	// What the backend stores, read back raw: the claim is left to expire.
	c := fetchOne(x, x.rawClient(), q.Name(), x.Caps.Lease)
	checkSealed(x, "the stored body", c.Body, secret, h)

	n := x.node(txmq.NodeOptions{RunMiddleware: []txmq.RunMiddleware{openPayloads(aead)}})
	rec := newRecorder()
	hl := newHeaderLog()
	listen(x, rec, q, n, hl.listener(func(_ context.Context, msgs []Msg) error {
		for _, m := range msgs {
			if m.P != secret {
				return txmq.Permanent(fmt.Errorf("parity: message %s arrived as %q, not decrypted", m.K, m.P))
			}
			if m.K == "dead" {
				return txmq.Permanent(errors.New("parity: this batch fails for good"))
			}
		}
		return nil
	}))
	// The four messages are one batch, which fails for good: it is dead-lettered sealed
	// (once: a duplicate copy of the batch finds it dead-lettered already).
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) >= 1 }, "the batch dead-lettered")
	for _, dl := range x.DeadLetters.Letters() {
		if dl.Queue == q.Name() {
			checkSealed(x, "the dead letter", dl.Body, secret, h)
		}
	}
	x.idle(n)
	for _, k := range keys {
		hl.check(x, k, h, 1)
	}
}
