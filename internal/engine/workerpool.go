package engine

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/txmq/txmq/core"
)

// maxIdleWorkers bounds the goroutines a node keeps parked for its next batches. Past it, a
// worker that finishes a batch ends, as it would without the pool.
const maxIdleWorkers = 256

// workerPool reuses the goroutines that run batches. A new goroutine starts on a small stack,
// and decoding a batch (encoding/json's reflection) and the listener grow it: at one message
// per batch the stack copies were about 15% of a node's CPU. A parked worker keeps its grown
// stack for the next batch. The zero value is ready; idle workers end when stop is done.
//
// A parked worker waits on the handoff channel alone: waiting on it and on stop (a select)
// made every wake-up lock both channels, and stop is shared by every parked worker. Once stop
// is done, the pool's watcher (started with the pool) hands each parked worker a quit job.
type workerPool struct {
	once    sync.Once
	handoff chan poolJob // unbuffered: a send succeeds only when a worker waits for it
	idle    atomic.Int32 // workers parked or about to park (counted before they check stop)
	started atomic.Int64 // goroutines started, for tests
}

// poolJob is one job of a workerPool: f, or else the runner's work on a claim (passed by value,
// so that handing a claim to a worker allocates no closure); quit ends the worker that gets it.
type poolJob struct {
	f    func()
	rn   *runner
	l    *Listener
	c    *core.Claim
	quit bool
}

// do runs j on the worker goroutine *gid (read at its first timed run, see goroutineID).
func (j *poolJob) do(gid *uint64) {
	if j.quit {
		return
	}
	if j.f != nil {
		j.f()
		return
	}
	if *gid == 0 && j.l.Spec.RunTimeout > 0 {
		*gid = goroutineID()
	}
	j.rn.workAs(j.l, j.c, *gid)
}

// run runs f on a parked worker if one waits, else on a new goroutine that then parks for up
// to maxIdleWorkers-1 others until stop is done. Every call on one pool passes the same stop
// (the first call's is the one the pool's watcher waits for).
func (p *workerPool) run(stop <-chan struct{}, f func()) { p.runJob(stop, poolJob{f: f}) }

// runWork is run of rn.work(l, c).
func (p *workerPool) runWork(stop <-chan struct{}, rn *runner, l *Listener, c *core.Claim) {
	p.runJob(stop, poolJob{rn: rn, l: l, c: c})
}

// runJob hands j to a parked worker, else starts one (see run).
func (p *workerPool) runJob(stop <-chan struct{}, j poolJob) {
	p.once.Do(func() {
		p.handoff = make(chan poolJob)
		go p.watch(stop)
	})
	select {
	case p.handoff <- j:
	default:
		p.started.Add(1)
		go p.work(stop, j)
	}
}

// parkedDepth is how deep in its stack a pooled worker waits for its next job. The garbage
// collector halves the stack of a goroutine that uses less than a quarter of it, so a worker
// parked at a shallow depth lost its grown stack at every collection and grew it again (two
// stack copies) on its next batch: at one message per batch that was about 7% of a node's CPU.
// Parked this deep, a worker keeps a stack of up to 4*parkedDepth (a listener and decoder path
// up to about 12 KiB deep); a deeper one is still shrunk, as before. The cost is parkedDepth
// bytes of stack per worker (at most maxIdleWorkers parked), zeroed once per goroutine.
const parkedDepth = 4 << 10

// work runs j, then waits for the next job while the pool is not full and stop is not done,
// parkedDepth deeper in its stack than it started (see parkedDepth).
func (p *workerPool) work(stop <-chan struct{}, j poolJob) {
	var pad [parkedDepth]byte
	keepFrame(&pad)
	p.loop(stop, j)
}

// keepFrame makes the compiler keep b, a frame's padding, on the stack.
//
//go:noinline
func keepFrame(b *[parkedDepth]byte) { b[0] = 0 }

// loop is work's loop: it runs j, then each next job, until a quit job or stop.
//
//go:noinline
func (p *workerPool) loop(stop <-chan struct{}, j poolJob) {
	var gid uint64
	for !j.quit {
		j.do(&gid)
		j = poolJob{} // keep nothing of a finished job while parked
		// Counted idle before stop is checked: the watcher, once stop is done, hands quit
		// jobs while any worker is counted, so a worker that saw stop open parks with one
		// on its way.
		if p.idle.Add(1) > maxIdleWorkers || isDone(stop) {
			p.idle.Add(-1)
			return
		}
		j = <-p.handoff
		p.idle.Add(-1)
	}
}

// watch waits until stop is done, then hands a quit job to every worker counted idle, until
// none is (a worker counted idle either parks and takes one, or sees stop and leaves).
func (p *workerPool) watch(stop <-chan struct{}) {
	<-stop
	for p.idle.Load() > 0 {
		select {
		case p.handoff <- poolJob{quit: true}:
		default:
			runtime.Gosched()
		}
	}
}

// isDone reports whether ch is closed (without waiting).
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
