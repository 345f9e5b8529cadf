// Package ledger holds the ledger's benchmarks on SQL jobs and on Redis (BenchmarkLedgerCost,
// BenchmarkLedgerPickup): the ledger off, on, and in ledger mode, end to end. They live in the
// bench module, beside the comparisons with River and Asynq, so that the txmq module's tests
// need no Redis client:
//
//	cd bench && go test -run '^$' -bench LedgerCost -benchtime 200000x ./ledger
package ledger
