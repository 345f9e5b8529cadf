package nats

import (
	"context"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// flushGroup confirms plain (not double) acknowledgements in groups: an Ack publishes its
// +ACK and then waits for a PING/PONG round trip that started after it, so that when Ack
// returns nil the server has read the acknowledgement (a server answers a PING only after
// everything the connection sent before it). Every Ack waiting at the same time shares one
// round trip, where a double ack costs the server a reply per message and the client a
// request per message: at one message per batch that was a third of what a node could
// drain. What the PONG does not say is that the server applied the ack; one it could not
// apply (the message was redelivered meanwhile, which the lease margin makes unlikely)
// leaves the message to its AckWait: it runs again, as at-least-once allows.
type flushGroup struct {
	nc      *natsgo.Conn
	timeout time.Duration

	mu      sync.Mutex
	next    *flushWait // the round trip that Acks published now wait for; nil until one joins
	running bool       // a goroutine runs round trips
}

// flushWait is one round trip and those waiting for it.
type flushWait struct {
	done chan struct{}
	err  error
}

// wait returns once a round trip that started after the call has come back (nil) or failed
// (each is bounded by Options.Timeout). The +ACK has left by then whatever ctx says, so ctx
// only ends the wait when it is already done at the call (and the wait does not arm ctx's
// timer: at one message per batch those timers were a tenth of an Ack).
func (g *flushGroup) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	w := g.next
	if w == nil {
		w = &flushWait{done: make(chan struct{})}
		g.next = w
	}
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	<-w.done
	return w.err
}

// run makes round trips while Acks wait for one.
func (g *flushGroup) run() {
	for {
		g.mu.Lock()
		w := g.next
		g.next = nil
		if w == nil {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		w.err = g.nc.FlushTimeout(g.timeout)
		close(w.done)
	}
}
