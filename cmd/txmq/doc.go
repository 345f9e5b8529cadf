// Command txmq is txmq's command line: a demo on the embedded memory backend, and (with an app
// database) migrations, outbox and dead-letter inspection, replay, status and benchmarks.
package main
