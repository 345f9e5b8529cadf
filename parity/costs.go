package parity

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// What each property costs, for CI to rank them: the suite's summary line ends with its
// seconds ("(93 s)"), and, when the environment variable TXMQ_PARITY_COSTS names a file, Run
// appends one line per property to it:
//
//	parity-cost SUITE GROUP/PROPERTY SECONDS
//
// SECONDS run from the moment the property took its slot (one of Caps.Parallel) to the end of
// its last cleanup (nodes and clients closed): the wall time it kept a slot busy, and a fair
// proxy for what it costs, since properties mostly wait. scripts/test sums the lines across
// suites and prints the costliest properties and groups after the parity summary.

// cost is one property's time in its slot.
type cost struct {
	name string
	d    time.Duration
}

// noteCost records that the property name held its slot for d.
func (s *suite) noteCost(name string, d time.Duration) {
	s.mu.Lock()
	s.costs = append(s.costs, cost{name, d})
	s.mu.Unlock()
}

// writeCosts appends the properties' costs to the file TXMQ_PARITY_COSTS names, if any.
func (s *suite) writeCosts(t *testing.T) {
	path := os.Getenv("TXMQ_PARITY_COSTS")
	if path == "" {
		return
	}
	var b strings.Builder
	s.mu.Lock()
	for _, c := range s.costs {
		fmt.Fprintf(&b, "parity-cost %s %s %.2f\n", s.h.Name(), c.name, c.d.Seconds())
	}
	s.mu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("parity[%s]: TXMQ_PARITY_COSTS: %v", s.h.Name(), err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Logf("parity[%s]: TXMQ_PARITY_COSTS: %v", s.h.Name(), err)
	}
}
