// Package chaos holds txmq's chaos suite: TestChaos runs real processes on loopback (three
// worker processes and a publisher, each the test binary re-executed in a role) against a
// backend it starts itself (a throwaway PostgreSQL cluster for sqljobs, redis-server, and
// nats-server v2.15 from the module in chaos/go.mod), injects one kind of fault per scenario
// (kill -9 of workers, the backend paused with SIGSTOP for longer than the lease, the backend
// killed and restarted on the same data directory, the app database's connections cut through
// a TCP proxy), and checks what was delivered against the ground truth the publisher committed
// in PostgreSQL. A Redis Cluster of three masters and three replicas gets one drill of its own,
// redis-cluster/kill-master: the master holding the work queue is killed and a replica promoted
// (see cluster_test.go); so does a 3-node JetStream cluster with R3 streams, nats-cluster/kill-node:
// the node leading the work queue's stream is killed and started again (see natscluster_test.go).
//
// Each scenario prints one line, and appends it to the file $TXMQ_CHAOS_SUMMARY names:
//
//	chaos[redis/kill-workers]: committed 2000, delivered 2000, missing 0, phantom 0, duplicates 13, exclusive overlaps 0, recover 1.4s
//
// Missing (committed, never delivered), phantom (delivered, never committed) and exclusive
// overlaps (two runs of the Exclusive queue overlapping in time, measured with the machine's
// one wall clock that every process shares) must be 0; duplicates are reported. A scenario
// whose backend loses acknowledged data by its nature (Redis without an append-only file,
// restarted) reports its figures without failing, and says so on its line;
// redis/restart-backend-noaof-ledger and nats/restart-backend-nosync-ledger run the same kill -9
// and restart with ledger mode on (package ledger, Options.Mode, horizon 3 leases) and fail on
// any missing message (overlaps, from leases the backend forgot, are reported only).
//
// Each backend server serves one group of scenarios, one after another (they fault that
// server); the groups run side by side, five at a time (TXMQ_CHAOS_PARALLEL sets another
// number), which takes about 80 s on a 2-core machine. A scenario's publisher commits
// messages before, during and for 3 s after its faults (at most 2,000 messages).
//
// Run it with
//
//	go test -race -count=1 -v -run TestChaos ./chaos
//
// It needs redis-server and PostgreSQL's server binaries (initdb, postgres under
// /usr/lib/postgresql/*/bin) on the machine; scripts/services.sh installs them. -short skips
// it. The suite never touches the services on the standard ports.
//
// It is a module of its own (github.com/txmq/txmq/chaos), a test module that nothing imports,
// so that what it requires (every adapter, the NATS server) stays out of the txmq module's
// requirements.
package chaos
