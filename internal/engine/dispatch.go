package engine

import "github.com/txmq/txmq/core"

// dispatchStep is what dispatchAll decided for one claim under dr.mu: its listener when the
// claim took a slot (start), else why not.
type dispatchStep struct {
	l      *Listener
	start  bool
	halted bool
	closed bool // closed or paused: given back
}

// dispatchAll is dispatch for each of a fetch's claims, in order, deciding them all under one
// lock of dr.mu: at one message per batch an in-process backend's fetch returns tens of claims,
// and a lock per claim was one more hand-off with the workers releasing their slots under the
// same lock. The claims' slots are all taken before the first worker starts, where dispatch
// took each just before its worker started; nothing else sees the difference (a slot is
// released only by its own worker).
func (dr *driver) dispatchAll(claims []*core.Claim) {
	switch len(claims) {
	case 0:
		return
	case 1:
		dr.dispatch(claims[0])
		return
	}
	n := dr.e
	steps := dr.dispatched[:0]
	var l *Listener
	var lq string
	dr.mu.Lock()
	for i, c := range claims {
		if i == 0 || c.Queue != lq {
			l, lq = dr.listeners[c.Queue], c.Queue
		}
		halted, closed := n.halted.Load(), dr.closed
		paused := n.held(c.Queue)
		st := dispatchStep{l: l, halted: halted, closed: closed || paused}
		if st.start = l != nil && !closed && !paused; st.start {
			dr.inflight[c.Queue]++
			n.run.admit() // under dr.mu, ordered before Close's Wait (closed is set under dr.mu)
		}
		steps = append(steps, st)
	}
	dr.mu.Unlock()
	for i, c := range claims {
		st := steps[i]
		switch {
		case st.halted:
		case st.start:
			n.run.start(st.l, c)
		case st.closed: // paused: fetched before this node saw the pause
			n.run.giveBack(c)
		default:
			n.log.Error("txmq: backend returned a batch of a queue this node did not ask for; releasing it", "queue", c.Queue, "batch", c.ID)
			n.run.giveBack(c)
		}
	}
	clear(steps) // the listeners
	dr.dispatched = steps[:0]
}
