// Package parity is the conformance suite every txmq adapter passes: the same properties, run
// the same way, against every backend, so that "swap the backend by setting" holds.
//
// An adapter package has exactly one test that calls Run with a Harness:
//
//	func TestParity(t *testing.T) { parity.Run(t, harness{}) }
//
// The adapter may live in any module (TestOutOfModuleAdapter builds one in a throwaway
// module): everything a harness needs is exported here. A harness whose backend is a server
// breaks it with a Proxy per Env (NewProxy). The transaction properties run the outbox in
// PostgreSQL: Options.PostgresURL (RunWith), else TXMQ_POSTGRES_URL, else the local default.
//
// The suite makes its own nodes (txmq.NewNode on Env.Backend, a fresh txmq.Registry and
// unique queue names per property, a short lease and a fast backoff), simulates node crashes
// with txmqtest.Halt, paused processes with txmqtest.Freeze and backend outages with
// Env.Break/Env.Restore, and adapts to the backend's Caps; it never skips a property. Each property is a named subtest
// (group/property, for example "leases/lost_lease_settle_errors"), and the ones where it
// matters run a second time with every batch stored twice (suffix "_dup", see
// txmqtest.Duplicate). At the end Run prints one line per adapter:
//
//	parity[memory]: 38 properties ran, 38 passed, 0 failed (41 s)
//
// (also appended to the file named by TXMQ_PARITY_SUMMARY, since go test hides a passing
// package's output without -v), ending with the suite's seconds; TXMQ_PARITY_COSTS names a
// file for each property's seconds (see costs.go). Skipped properties (the Postgres ones, locally, when no
// database answers) are counted as skipped, never as passed.
//
// The group "ordering" checks per-key order (txmq.QueueConfig.Ordered). On an adapter that does
// not implement core.KeyOrderer its property "declare" checks that nodes refuse an Ordered
// queue, and every other ordering property is counted "not supported by the adapter", neither
// passed nor skipped.
//
// The group "identity" checks message ids; its dedup properties (txmq.QueueConfig.IDDedupWindow)
// run where the adapter implements core.IDDeduper with a window of at least 8 s. Elsewhere they
// check that a node refuses a queue asking for it and are counted "not supported by the
// adapter", neither passed nor skipped.
//
// The group "limits" checks cluster-wide concurrency limits (txmq.QueueConfig.ClusterLimit and
// KeyLimit) with a counter of runs kept outside the nodes: never above the limit, in all and per
// fairness key, across three nodes; reaching it; released on settle and after the lease of a
// node that cannot extend, is paused or crashes. On an adapter that does not implement
// core.ClusterLimiter its property "declare" checks the refusal, and the group is counted "not
// supported by the adapter".
//
// The group "unique" checks unique jobs (txmq.QueueConfig.Unique, core.UniqueKeeper): each
// mode through direct publishes from two nodes, through the outbox (RunInTx, the relay, a
// sweep) and in ledger mode; a duplicate is left out, counted in Stats.Deduplicated, never an
// error. On an adapter that does not keep a mode its property "declare" checks that nodes
// refuse the queue naming it and the mode, and the group is counted "not supported by the
// adapter".
//
// The group "contract" drives one raw client (or a few) without nodes, one property per rule of
// package core's "Rules every adapter follows" (concurrency, Body ownership, Close, no
// retries of its own, cancellation) plus the Exclusive and lease rules on raw clients; its
// time bounds are PromptBound, UnavailableBound and CloseBound.
//
// # Load
//
// A property must hold on a loaded machine: it waits for events, with Caps.Timeout as the
// deadline (its fixed sleeps only give wrong behaviour, a redelivery say, time to show), and
// a timing it needs is derived from what it measures (delay_holds_back_its_key doubles its
// delay while the machine is too slow to judge). Where a property needs its nodes or clients to keep a
// lease (a long run extended, a batch given back before its lease ends), the lease is the
// suite's or longer: five times the latency the suite measured over the last 30 s (the
// longest delay of a typical second: a backend call of the nodes' clients, a probe of the
// backend, or a timer firing late), at most a quarter of Caps.Timeout (see keptLease), so
// that two CPU-burning processes beside the suite do not lose it. Each suite logs that
// latency beside its summary. A window a property must observe a state in (a delayed message
// before it is due) grows the same way (window). A property that counts runs exactly gives
// its nodes a lease ten times the suite's (steadyLease) and allows one more run per lease
// the nodes report lost (checkRuns): a run whose lease was lost runs again, as at-least-once
// allows. A wait bound by throughput (every message of many batches delivered) lasts while
// the runs progress (progressing): Caps.Timeout without progress fails it, or eight times
// Caps.Timeout in all.
//
// # Concurrency
//
// Properties mostly wait on time (leases, delays, backoff), so they run concurrently, up to
// Caps.Parallel at once. They are started from goroutines as ordinary subtests rather than
// with t.Parallel, because t.Parallel is bounded by -parallel (GOMAXPROCS by default, 2 on
// a small CI machine), which would serialize the suite. Every property uses its own Env
// (namespace), registry and queue names, so they do not interfere.
//
// txmq's own packages with several suites (a backend in two connection modes, or with its
// outbox in another app database) run them one after the other, as subtests of one
// TestParity: side by side they shared a CI machine's busy cores and made the package longer,
// not shorter.
package parity
