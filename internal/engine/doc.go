// Package engine is txmq's engine: what a node does between the app API (package txmq, which
// encodes and decodes typed messages) and a backend (core.Backend). It works on untyped
// queues (Spec) and listeners (Listener: a Spec and a func that decodes a stored body into a
// Batch bound to the typed listener).
//
// An Engine holds three components, each owning its state behind its own lock:
//
//   - the publisher (publish.go, buffer.go, flights.go, batches.go, handedkeys.go): routes a
//     publish call (Engine.Publish: staged in the caller's transaction, or buffered), holds
//     the coalescing buffer and its flushes, writes batches to the backend and hands the
//     refused ones to the outbox, and bounds its writes when Close begins;
//   - the driver (driver.go, admit.go): owns the listeners and the slots, asks the backend
//     for the free slots of each listened queue (Fetch), takes a slot before a batch is
//     handed on, and steps back from a queue whose lease it lost;
//   - the runner (worker.go, terminal.go, lease.go, fences.go, timeouts.go, due.go,
//     workerpool.go): runs each claimed batch through the policy (decode, run budget,
//     listener, retry with backoff, dead letter, OnError once per batch), extends its lease
//     while it runs, fences a claim whose lease was not confirmed in time, and ends a run
//     past its queue's run timeout.
//
// Features plug in through the extension points of extend.go (Gate, Admitter, Tracing,
// Writer, Preparer, Looper, Recorder, PublishWrapper, SpecChecker), given as
// Options.Features; the engine imports no feature (they live under internal/feature). The
// ledger's events are a Recorder (record.go is the engine's side), id dedup a SpecChecker
// and a PublishWrapper.
//
// Shutdown (shutdown.go) orchestrates the three: Close marks the driver closed, drains the
// publisher on a bounded context of its own, and waits for the runner's admitted batches,
// logging what it waits for and what it did (closelog.go).
package engine
