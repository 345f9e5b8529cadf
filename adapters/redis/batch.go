package redis

import (
	"context"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// settleBatcher sends the settle and extend scripts of concurrent calls together, one
// pipeline per round trip (group commit): a call waits only for its own script's reply, and
// calls that arrive while a pipeline is in flight ride the next one. Nothing waits on a timer,
// so a lone call costs one round trip as before; under load (many workers acking at once)
// one write and one read carry many settles, on the client and on the server, instead of one
// pooled connection and two system calls per settle.
//
// flushers pipelines may be in flight at once, so one slow reply (a connection being cut)
// does not hold up every settle behind it.
type settleBatcher struct {
	be   *Backend
	reqs chan *settleReq
}

// reqPool recycles settle requests and their reply channels (two allocations per settle, and
// a one-message batch settles once per message).
var reqPool = sync.Pool{New: func() any { return &settleReq{res: make(chan settleRes, 1)} }}

// settleReq is one settle or extend waiting for its reply.
type settleReq struct {
	ctx  context.Context
	keys *queueKeys
	args [settleArgs]any // one settle's entries in settleScript's ARGV: the first nargs
	// nargs is how many of args the settle takes (settleArgs, or ackArgs for a short ack);
	// 0 means settleArgs.
	nargs int
	fair  bool           // the claim was a fair queue's (settleScript's ARGV[2])
	res   chan settleRes // buffered: the flusher never blocks on a caller that gave up
}

type settleRes struct {
	n   int64
	err error
}

const (
	// settleFlushers is how many settle pipelines may be in flight at once.
	settleFlushers = 4
	// maxSettleBatch bounds the scripts in one settle pipeline.
	maxSettleBatch = 256
)

func newSettleBatcher(be *Backend) *settleBatcher {
	b := &settleBatcher{be: be, reqs: make(chan *settleReq, maxSettleBatch)}
	for range settleFlushers {
		go b.flushLoop()
	}
	return b
}

// run sends one settle (the first nargs entries of args, settleScript's ARGV for it; fair
// when the claim was a fair queue's) of a queue with the next pipeline and returns its reply. It returns when the reply arrived, when
// ctx ends (the settle may still happen) or at Close.
func (b *settleBatcher) run(ctx context.Context, keys *queueKeys, args [settleArgs]any, nargs int, fair bool) (int64, error) {
	r := reqPool.Get().(*settleReq)
	r.ctx, r.keys, r.args, r.nargs, r.fair = ctx, keys, args, nargs, fair
	select {
	case b.reqs <- r: // the common case, without a three-way select
	default:
		select {
		case b.reqs <- r:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-b.be.done:
			return 0, goredis.ErrClosed
		}
	}
	select {
	case res := <-r.res:
		// The flusher is done with r once it replied: reuse it. A request whose caller gave
		// up below is left to the garbage collector, as the flusher may still reply to it.
		*r = settleReq{res: r.res}
		reqPool.Put(r)
		return res.n, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-b.be.done:
		return 0, goredis.ErrClosed
	}
}

// flushLoop takes the next call, every call queued behind it, and runs them in one pipeline.
func (b *settleBatcher) flushLoop() {
	batch := make([]*settleReq, 0, maxSettleBatch)
	for {
		var first *settleReq
		select {
		case first = <-b.reqs:
		case <-b.be.done:
			return
		}
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxSettleBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		b.flush(batch)
		clear(batch)
	}
}

// flush runs batch in one pipeline, one settleScript call per queue, skipping calls whose
// caller already gave up (they were never sent, as go-redis does not send a command on a
// cancelled context either).
func (b *settleBatcher) flush(batch []*settleReq) {
	var groups [][]*settleReq
	index := make(map[*queueKeys]int)
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.res <- settleRes{err: err}
			continue
		}
		i, ok := index[r.keys]
		if !ok {
			i = len(groups)
			index[r.keys] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	if len(groups) == 0 {
		return
	}
	// Detached from every caller: once sent, each reply goes back to whoever still waits.
	ctx, cancel := context.WithTimeout(context.Background(), b.be.callTimeout)
	defer cancel()
	cmds, err := b.be.runScripts(ctx, settleScript, len(groups), func(i int) ([]string, []any) {
		g := groups[i]
		args := make([]any, 0, 2+settleArgs*len(g))
		fair := argZero
		for _, r := range g {
			if r.fair {
				fair = argOne
				break
			}
		}
		args = append(args, g[0].keys.wake, fair)
		for _, r := range g {
			n := r.nargs
			if n == 0 {
				n = settleArgs
			}
			args = append(args, r.args[:n]...)
		}
		return g[0].keys.script, args
	})
	for i, g := range groups {
		var vals []int64
		gerr := err
		if c := cmds[i]; c != nil {
			vals, gerr = c.Int64Slice()
			if gerr == nil && len(vals) != len(g) {
				gerr = fmt.Errorf("unexpected settle reply %v for %d settles", c.Val(), len(g))
			}
		}
		for j, r := range g {
			if gerr != nil {
				r.res <- settleRes{err: gerr}
			} else {
				r.res <- settleRes{n: vals[j]}
			}
		}
	}
}
