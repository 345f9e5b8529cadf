// Package outboxtest is the shared test suite of the outbox on database/sql app databases
// other than PostgreSQL (adapters/mysql/appdb, adapters/sqlite/appdb): the same tests of
// RunInSQLTx, savepoints, the sweep, the dead letters, the control tables (pauses, ticks,
// rate-limit buckets, node heartbeats), the crash window and the figures, run by each
// adapter's tests on its own database.
//
// An adapter describes its database with a Target (how to make a migrated database of a
// test's own, its dialect, its business table's DDL, its clock) and calls the suites from its
// tests:
//
//	func TestOutbox(t *testing.T)  { outboxtest.RunOutbox(t, target) }
//	func TestControl(t *testing.T) { outboxtest.RunControl(t, target) }
//
// Setup gives the adapter's own tests the same Env (store, node, queues, recording backend)
// the suites use.
package outboxtest
