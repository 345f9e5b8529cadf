package parity

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// Harness is what an adapter's test supplies: how to get a clean backend namespace and what
// the backend can do.
type Harness interface {
	// Name names the adapter in subtest logs and the summary line ("memory", "redis", ...).
	Name() string

	// Open returns a fresh, isolated backend namespace for one property: a key prefix, a
	// queue-name prefix, a database schema or a new in-process backend, so that properties
	// running at the same time never see each other's batches. Everything it creates is
	// released in t.Cleanup. When the backend's server is missing, Open skips locally and
	// fails when CI=true (the suite never turns a skip into a pass).
	Open(t *testing.T) Env

	// Capabilities reports the backend's limits and the timing that suits it.
	Capabilities() Caps
}

// Env is one isolated namespace of a backend.
type Env interface {
	// Backend returns a new client of this namespace, as a separate process would open one:
	// two calls give two clients that share the stored batches (the memory adapter returns
	// its one *Backend every time). The suite gives each node its own client, and drives
	// clients directly for the lease properties. Clients are closed in t.Cleanup (after the
	// nodes using them, which the suite closes first).
	Backend(t *testing.T) core.Backend

	// Break makes the namespace's backend unreachable for every client of this Env (and no
	// other Env): calls fail with errors wrapping core.ErrBackendUnavailable, within the
	// client's own timeouts. Stored batches survive. A real-server harness typically puts a
	// TCP proxy per Env between the clients and the server and cuts it.
	Break(t *testing.T)

	// Restore ends an outage started by Break; clients work again without being reopened.
	Restore(t *testing.T)
}

// Caps are what the suite adapts to. Zero fields mean the defaults documented on each.
type Caps struct {
	// MaxNativeDelay is the longest delay the backend stores natively (SQS: 15 min); 0 means
	// unlimited. The suite publishes a delay longer than it and expects the adapter's own
	// handling (re-delaying, a holding area) to deliver it on time; a harness exposes a short
	// test cap (for example 2 s) so this does not take 15 minutes. Values over 20 s fail.
	MaxNativeDelay time.Duration

	// MaxMessageSize is the backend's largest native message in bytes (SQS: 256 KiB); 0 means
	// unlimited. Informational: the suite publishes larger batches either way and they must
	// arrive intact.
	MaxMessageSize int

	// Lease is the lease the suite's nodes use and the one it asks for in direct Fetch calls;
	// default 1 s. Use the smallest lease the backend honours precisely (SQS visibility is
	// whole seconds: 1 s or 2 s).
	Lease time.Duration

	// PollWait is the nodes' Fetch wait; default 200 ms.
	PollWait time.Duration

	// DueTolerance is how late a delayed or scheduled batch may arrive after its due time;
	// default 2 s. It is the only upper bound on timing the suite asserts. On a loaded machine
	// the suite adds twice the latency it measured (see keptLease) and a lease per lease the
	// listening node reports lost.
	DueTolerance time.Duration

	// Timeout bounds every wait for something that must happen; default 20 s.
	Timeout time.Duration

	// Parallel is how many properties run at once; default 8.
	Parallel int
}

func (c Caps) withDefaults() Caps {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Lease, time.Second)
	def(&c.PollWait, 200*time.Millisecond)
	def(&c.DueTolerance, 2*time.Second)
	def(&c.Timeout, 20*time.Second)
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	return c
}

// CapOvershoot is how far the suite lets MaxConcurrentBatches be exceeded on one node. The
// engine takes a slot before it hands a batch to a worker and asks Fetch for exactly the free
// slots, so a correct adapter never exceeds the cap: the documented overshoot is 0.
const CapOvershoot = 0

// property is one named check; dup also runs it under duplicate delivery.
type property struct {
	group, name string
	dup         bool
	run         func(x *X)
}

var (
	propsMu sync.Mutex
	props   []property
)

// register adds properties; each behaviour file registers its own in init.
func register(group string, ps ...property) {
	propsMu.Lock()
	defer propsMu.Unlock()
	for _, p := range ps {
		p.group = group
		props = append(props, p)
	}
}

type suite struct {
	h    Harness
	caps Caps
	opts Options
	sem  chan struct{}

	ran, passed, failed, skipped atomic.Int64
	mu                           sync.Mutex
	failures                     []string

	// unsupported counts properties of a capability the adapter does not have (see
	// X.needOrdering): neither passed nor skipped for a missing service.
	unsupported atomic.Int64

	// costs are how long each property held its slot, closing included (see costs.go).
	costs []cost
}

// Options are what the suite needs from the test's surroundings rather than from the
// adapter. A nil *Options, and every zero field, means the default documented on the field.
type Options struct {
	// PostgresURL is the PostgreSQL database in which the transaction properties run the
	// outbox (package outbox) in front of the adapter, each property in a schema of its own,
	// dropped at its end. Empty means the TXMQ_POSTGRES_URL environment variable, else
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When the database does not
	// answer those properties are skipped (counted as skipped, never as passed), or fail
	// when CI=true or TXMQ_REQUIRE_SERVICES=1.
	PostgresURL string
	// AppDB, when set, runs the outbox in another app database than PostgreSQL (see AppDB).
	// Default nil: PostgreSQL at PostgresURL.
	AppDB AppDB
	// Groups, when set, runs only the properties of these groups (a second run of the suite
	// with an AppDB needs only the groups that publish through the outbox). Default: every
	// group.
	Groups []string
}

// Run runs every property against h, each as a subtest, and prints a summary line. It is
// RunWith with the default Options.
func Run(t *testing.T, h Harness) { RunWith(t, h, nil) }

// RunWith is Run with opts (nil means the defaults).
func RunWith(t *testing.T, h Harness, opts *Options) {
	s := &suite{h: h, caps: h.Capabilities().withDefaults()}
	if opts != nil {
		s.opts = *opts
	}
	s.sem = make(chan struct{}, s.caps.Parallel)
	machine.start()
	start := time.Now()
	if s.caps.MaxNativeDelay > 20*time.Second {
		t.Fatalf("parity[%s]: Caps.MaxNativeDelay is %v: expose a short test cap (a few seconds) so the suite can publish a longer delay quickly", h.Name(), s.caps.MaxNativeDelay)
	}
	t.Cleanup(func() {
		line := fmt.Sprintf("parity[%s]: %d properties ran, %d passed, %d failed", h.Name(), s.ran.Load(), s.passed.Load(), s.failed.Load())
		elapsed := time.Since(start)
		if n := s.skipped.Load(); n > 0 {
			line += fmt.Sprintf(", %d skipped (not passed)", n)
		}
		if n := s.unsupported.Load(); n > 0 {
			line += fmt.Sprintf(", %d not supported by the adapter (not passed)", n)
		}
		line += fmt.Sprintf(" (%d s)", int(elapsed.Round(time.Second)/time.Second))
		s.mu.Lock()
		sort.Strings(s.failures)
		if len(s.failures) > 0 {
			line += "\n  failed: " + strings.Join(s.failures, ", ")
		}
		s.mu.Unlock()
		s.writeCosts(t)
		fmt.Fprintln(os.Stdout, line)
		t.Log(line)
		t.Logf("parity[%s]: the longest latency measured over the last %v (see keptLease): %v", h.Name(), latencyWindow, machine.recent().Round(time.Millisecond))
		// go test hides a passing package's output without -v: CI can collect the lines here.
		if path := os.Getenv("TXMQ_PARITY_SUMMARY"); path != "" {
			if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintln(f, line)
				_ = f.Close()
			}
		}
	})
	propsMu.Lock()
	ps := append([]property(nil), props...)
	propsMu.Unlock()
	groups := map[string][]property{}
	var order []string
	for _, p := range ps {
		if len(s.opts.Groups) > 0 && !slices.Contains(s.opts.Groups, p.group) {
			continue
		}
		if _, ok := groups[p.group]; !ok {
			order = append(order, p.group)
		}
		groups[p.group] = append(groups[p.group], p)
	}
	var wg sync.WaitGroup
	for _, g := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(g, func(t *testing.T) {
				var gwg sync.WaitGroup
				for _, p := range groups[g] {
					gwg.Add(1)
					go func() { defer gwg.Done(); s.runProp(t, p, false) }()
					if p.dup {
						gwg.Add(1)
						go func() { defer gwg.Done(); s.runProp(t, p, true) }()
					}
				}
				gwg.Wait()
			})
		}()
	}
	wg.Wait()
}

func (s *suite) runProp(t *testing.T, p property, dup bool) {
	name := p.name
	if dup {
		name += "_dup"
	}
	t.Run(name, func(t *testing.T) {
		s.sem <- struct{}{}
		defer func() { <-s.sem }()
		s.ran.Add(1)
		var x *X
		began := time.Now()
		// Registered first, so it runs last: after every other cleanup has had its say.
		t.Cleanup(func() {
			s.noteCost(p.group+"/"+name, time.Since(began))
			switch {
			case x != nil && x.unsupported.Load() && !t.Failed():
				s.unsupported.Add(1)
			case t.Failed():
				s.failed.Add(1)
				s.mu.Lock()
				s.failures = append(s.failures, p.group+"/"+name)
				s.mu.Unlock()
			case t.Skipped():
				s.skipped.Add(1)
			default:
				s.passed.Add(1)
			}
		})
		x = s.newX(t, dup)
		p.run(x)
	})
}

// queueSeq makes queue names unique within the process.
var queueSeq atomic.Int64

// runID makes queue names unique across processes sharing a server.
var runID = func() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}()
