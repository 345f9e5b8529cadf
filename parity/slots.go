package parity

import (
	"os"
	"strconv"
	"sync"
)

// slots is a counting semaphore whose heavy waiters go first: a property the suite knows to be
// long (heavyProps) takes the next free slot before any light one waiting. Started first, the
// long properties overlap the many short ones instead of running alone at the end of a suite.
type slots struct {
	mu           sync.Mutex
	cond         *sync.Cond
	free         int
	waiting      int // callers in acquire, heavy or not
	heavyWaiting int
}

func newSlots(n int) *slots {
	s := &slots{free: max(n, 1)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// acquire waits for a free slot; a light caller also waits while a heavy one does.
func (s *slots) acquire(heavy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	defer func() { s.waiting-- }()
	if heavy {
		s.heavyWaiting++
		defer func() { s.heavyWaiting-- }()
	}
	for s.free == 0 || !heavy && s.heavyWaiting > 0 {
		s.cond.Wait()
	}
	s.free--
}

// release gives a slot back.
func (s *slots) release() {
	s.mu.Lock()
	s.free++
	s.mu.Unlock()
	s.cond.Broadcast()
}

// processParallel is how many properties run at once in one test binary, across every suite
// it runs at the same time (suites a package runs side by side): the TXMQ_PARITY_PARALLEL
// environment variable, default 12. Each suite also keeps to its own Caps.Parallel.
func processParallel() int {
	if n, err := strconv.Atoi(os.Getenv("TXMQ_PARITY_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 12
}

// process is the slots every suite of this test binary shares.
var process = newSlots(processParallel())

// heavyAtOnce is how many heavy properties (heavyProps) of this test binary run at once, across
// its suites: they go first, but not all together. Three suites' twelve 10,000-batch backlogs
// started at once at load 40 shared the CPU so thinly that one outlasted its wait for the
// backlog to be stored.
const heavyAtOnce = 3

// heavyTurns is the turns heavy properties take before any slot (see runProp).
var heavyTurns = newSlots(heavyAtOnce)

// heavyProps are the properties that take the longest (a backlog of 10,000 batches, a
// thousand ordering keys, lease faults that wait out leases), by "group/name"; their
// duplicate-delivery runs count too.
var heavyProps = map[string]bool{
	"fairness/lone_key_within_bound":                 true,
	"fairness/lone_key_arrives_mid_backlog":          true,
	"fairness/with_ordering_keys":                    true,
	"fairness/with_priorities":                       true,
	"fairness/survives_node_restart":                 true,
	"ordering/thousand_keys_interleaved":             true,
	"faults/exclusive_holds_while_extend_fails":      true,
	"faults/exclusive_holds_while_extend_hangs":      true,
	"faults/exclusive_holds_across_node_pause":       true,
	"ratelimit/cluster_wide_within_limit_plus_burst": true,
}
