package nats

import (
	"context"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// Backend is a core.Backend on NATS JetStream. It is safe for concurrent use; each node
// usually has its own Backend (its own connection), and Backends with the same Prefix on the
// same server share every queue. The zero value is not usable: call New or NewWithConn.
type Backend struct {
	opts      Options
	nc        *natsgo.Conn
	ownConn   bool
	js        jetstream.JetStream
	chunkSize int

	mu     sync.Mutex
	queues map[string]*queueState
	closed bool
	done   chan struct{}  // closed by Close
	wake   chan struct{}  // closed and replaced whenever a poll delivers or ends
	polls  sync.WaitGroup // running pulls; Close waits for them
	acks   flushGroup     // confirms plain acks (see flushGroup)

	// noStashSweep leaves stashed messages to Fetch and Close (tests of a sweep that could
	// not run).
	noStashSweep bool
}

var _ core.Backend = (*Backend)(nil)

// New connects to the NATS servers in url (a comma-separated list of nats:// or tls://
// URLs, as nats.Connect takes) and returns a Backend that owns the connection and closes it in
// Close.
func New(url string, opts *Options) (*Backend, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	nc, err := natsgo.Connect(url, o.connOptions()...)
	if err != nil {
		return nil, wrap("connect", "", err)
	}
	be, err := newBackend(nc, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	be.ownConn = true
	return be, nil
}

// NewWithConn returns a Backend on an existing connection, which the caller keeps owning
// (Close does not close it). The connection options in opts are ignored; for the outage
// behaviour described in the package doc, the connection should reconnect forever and use
// nats.ReconnectBufSize(-1).
func NewWithConn(nc *natsgo.Conn, opts *Options) (*Backend, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nats: NewWithConn with a nil connection", core.ErrInvalidConfig)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return newBackend(nc, o)
}

func newBackend(nc *natsgo.Conn, o Options) (*Backend, error) {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout))
	if err != nil {
		return nil, wrap("jetstream", "", err)
	}
	chunk := o.ChunkSize
	if chunk == 0 {
		chunk = int(nc.MaxPayload()) - chunkHeadroom
	}
	if chunk < 1024 {
		chunk = 1024
	}
	return &Backend{
		opts:      o,
		acks:      flushGroup{nc: nc, timeout: o.Timeout},
		nc:        nc,
		js:        js,
		chunkSize: chunk,
		queues:    make(map[string]*queueState),
		done:      make(chan struct{}),
		wake:      make(chan struct{}),
	}, nil
}

// Publish stores the batch in its queue's stream: on the ready subject when it is due, or as a
// JetStream message schedule that the server turns into a ready message once the batch's
// delay (b.DelayFrom) has passed on the server's clock. A body
// larger than the chunk size is stored as chunks plus a small reference message. It returns
// once the server has acknowledged every part.
func (be *Backend) Publish(ctx context.Context, b core.OutgoingBatch) error {
	if err := checkQueue("publish", b.Queue); err != nil {
		return err
	}
	q, err := be.queue(ctx, "publish", b.Queue)
	if err != nil {
		return err
	}
	if b.DedupWindow > 0 {
		return be.publishDedup(ctx, q, b)
	}
	return be.store(ctx, q, b.ID, b.Body, b.DelayFrom(time.Now()), b.Key, b.Exclusive)
}

// Close stops waiting fetches at once, waits for outstanding pulls to end on their own (at
// most a pull's wait: the Fetch's Wait, capped at a quarter of AckWait), gives back every
// message fetched but not handed out without counting the delivery (see requeue), and closes
// the connection if the Backend opened it. A pull is not cut short: the client would drop
// the messages the server had already sent it, and each would come back after AckWait with a
// delivery counted that never ran. Stored batches stay on the server. Every later call fails
// with an error wrapping core.ErrClosed. Closing twice is a no-op.
func (be *Backend) Close() error {
	be.mu.Lock()
	if be.closed {
		be.mu.Unlock()
		return nil
	}
	be.closed = true
	close(be.done)
	be.mu.Unlock()
	be.giveBack(be.takeStash()) // now rather than after its lease, unless the lease is gone
	be.polls.Wait()
	be.giveBack(be.takeStash()) // what the pulls received meanwhile
	if be.ownConn {
		// Publish and flush pending acks before closing; Drain would wait for subscriptions
		// too.
		_ = be.acks.flush()
		be.nc.Close()
	}
	return nil
}

// takeStash empties every queue's stash and returns what it held.
func (be *Backend) takeStash() []*stashed {
	be.mu.Lock()
	defer be.mu.Unlock()
	var out []*stashed
	for _, q := range be.queues {
		for _, l := range q.lanes() {
			out = append(out, l.stash...)
			l.stash = nil
		}
	}
	return out
}

// Conn returns the Backend's NATS connection, for monitoring; do not close it.
func (be *Backend) Conn() *natsgo.Conn { return be.nc }

// usable returns the error for a call made after Close, or while the connection is down for
// longer than Options.Timeout (or ctx): a call made during a reconnect waits for it, so that
// a short blip (a server restart, a proxy failover) costs latency rather than an error.
func (be *Backend) usable(ctx context.Context, op, queue string) error {
	var deadline time.Time
	for {
		select {
		case <-be.done: // closed by Close with closed set: no lock on every settle
			return errClosed(op, queue)
		default:
		}
		st := be.nc.Status()
		switch st {
		case natsgo.CONNECTED:
			return nil
		case natsgo.CLOSED:
			return wrap(op, queue, natsgo.ErrConnectionClosed)
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(be.opts.Timeout)
			if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
				deadline = d
			}
		}
		if !now.Before(deadline) || ctx.Err() != nil {
			return wrap(op, queue, fmt.Errorf("connection status %s: %w", st, natsgo.ErrDisconnected))
		}
		select {
		case <-time.After(reconnectPoll):
		case <-ctx.Done():
		case <-be.done:
		}
	}
}

// reconnectPoll is how often a call waiting for a reconnect checks the connection.
const reconnectPoll = 10 * time.Millisecond

// callCtx bounds one server call by Options.Timeout within ctx.
func (be *Backend) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, be.opts.Timeout)
}

// checkQueue rejects an empty queue name or one that is not a single subject token.
func checkQueue(op, name string) error {
	if name == "" {
		return fmt.Errorf("%w: nats: %s: the queue name is empty; pass the declared queue name", core.ErrInvalidConfig, op)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%w: nats: %s: queue name %q is not portable (want ^[a-z][a-z0-9_-]{0,63}$)", core.ErrInvalidConfig, op, name)
		}
	}
	return nil
}
