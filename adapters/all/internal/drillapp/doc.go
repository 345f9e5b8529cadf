// Command drillapp is the app of the swap drill (adapters/all/drill_test.go): one
// binary that opens txmq from the environment alone (txmq.Open with TXMQ_BACKEND,
// TXMQ_DATABASE_URL, TXMQ_DRAIN_BACKENDS, ...), consumes the queue "drill" and publishes to it
// inside database transactions, so that a swap of TXMQ_BACKEND can be tried on real processes.
//
// Each message is a key "<process id>-<n>". A publish inserts the key into drill_published in
// the same transaction (so that table holds exactly the committed messages); the listener
// inserts every key it receives into drill_seen (duplicates included). Both tables live in
// TXMQ_SCHEMA.
//
// Settings besides txmq's: DRILL_SLOW (a Go duration each batch takes, default 0),
// DRILL_PUBLISH_EVERY (a Go duration between publishes, default 5ms; 0 publishes nothing),
// DRILL_LEASE (the node's lease, default 2s), DRILL_RECOVERY_AGE (the outbox's recovery age,
// default 3s; the sweep runs every second). SIGUSR1 stops publishing (consuming goes on);
// SIGTERM or SIGINT closes the app gracefully and exits 0.
package main
