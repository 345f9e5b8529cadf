// Package core is the contract between txmq's engine and its backends, for adapter authors:
// the Backend interface and its types (OutgoingBatch, FetchRequest, Claim, Depth), the sentinel
// errors an adapter wraps, URL-scheme registration (RegisterBackend), redaction of secrets in
// URLs and errors (Redact), and the contract of transactional stores (Tx, Pending, Handoff,
// DeadLetterSink) that the outbox implements. Apps import package txmq, whose doc explains the
// semantics every backend must give. The engine (the publish buffer, the driver, the runner
// with the retry, dead-letter and OnError policy) is not here: it lives in package txmq, and
// this package is only the contract between that engine and the backends and stores.
//
// # Where to read
//
//   - backend.go: what every adapter implements (Backend, OutgoingBatch, FetchRequest, Claim,
//     Depth, the drop reasons); errors.go: the sentinels it wraps.
//   - capabilities.go: the optional interfaces an adapter may implement, each with who calls
//     it and when.
//   - stores.go: the contracts of the stores beside a backend: the transaction (Tx), the
//     outbox (Handoff, KeyLister), dead letters (DeadLetterSink), the ledger
//     (MessageRecorder, MessageStore) and the shared rate limit (Limiter).
//   - The helpers: mux.go (RegisterBackend, OpenBackend), fetchreq.go (defaults, Normalize,
//     Shares), wait.go (ClaimWait), unwrap.go (capabilities through wrappers), tx.go, keys.go,
//     claim.go, ids.go, leasemargin.go, redact.go.
//
// # Writing an adapter
//
// Implement Backend (backend.go documents every rule), register a URL scheme with
// RegisterBackend in an init func of the adapter's package (apps import it for its side effect,
// as with database/sql drivers), classify the SDK's errors in one place (transient: wrap
// ErrBackendUnavailable; a permanent refusal of a batch: ErrRejected), and run the parity suite
// (package parity) against a real server.
//
// # Rules every adapter follows
//
// Each rule has a property in the parity group "contract" (named in brackets), run on a raw
// client of every adapter; the bounds are the parity package's constants.
//
//   - Concurrency [concurrent_calls_one_client]: a node calls Publish, Fetch, Ack, Retry,
//     Drop, Extend and Depths of one client from many goroutines at once, on different
//     claims, and settles or extends claims while a Fetch runs. A Backend must be safe for
//     concurrent use. The node never runs two calls on one claim at once (a settle and an
//     Extend included); a settle repeated after one succeeded must be a no-op (nil).
//   - Body ownership [body_ownership]: OutgoingBatch.Body and the body given to Retry are the
//     adapter's for the duration of the call only: the caller may overwrite or reuse the buffer
//     once the call returns, so an adapter that keeps the bytes past the call (the memory
//     adapter stores them) copies them. Claim.Body is the caller's once Fetch returns: the
//     adapter never writes to it later (the claim's own Retry and Ack, and later hand-outs of
//     the batch, included); it may hand out a slice it stores if it never writes to that slice.
//   - Close [after_close]: Close ends a Fetch that is waiting (it returns at once, with nothing
//     or an error wrapping ErrClosed) and may wait, up to parity.CloseBound, for requests
//     already sent to end on their own rather than cut them (cut short, a long poll may have
//     taken messages the client then drops, each coming back with a delivery counted that
//     never ran): nats lets its pulls run out (a Fetch's wait, or a quarter of the lease for
//     an idle queue's), sqs ends its idle long polls (20 s) early with a wake message. After
//     Close every method returns an error wrapping ErrClosed within parity.PromptBound, never
//     blocks and never panics, a claim taken before Close included (its lease runs out; Close
//     gives back only batches received but not handed out); Close again returns nil. The node
//     does not close a backend it was given; the drain wrapper closes the backends it wraps,
//     and a closed wrapper refuses every call even when those backends are shared with other
//     wrappers.
//   - No retries of its own [no_adapter_retries]: while the backend is unreachable every call
//     returns an error wrapping ErrBackendUnavailable within parity.UnavailableBound instead of
//     retrying or waiting until the backend is back: the node owns every retry, backoff and
//     budget. Within that bound a client may repeat a request where the repeat cannot settle
//     twice: go-redis repeats a failed command up to Options.MaxRetries (a repeated publish of a
//     stored id is ignored, a repeated settle finds its token gone), sqljobs runs a statement
//     once more when nothing reached the server, the SQS SDK repeats a call up to
//     RetryMaxAttempts (a repeated send may store a second copy, which at-least-once allows),
//     and nats waits up to Options.Timeout for a reconnect. (A background receive that failed
//     during an outage may report its error at the next Fetch, after the backend is back: sqs.)
//   - Cancellation [cancelled_fetch_loses_nothing, cancelled_publish_and_settle]: a Fetch whose
//     ctx is done, before the call or while it waits, returns within parity.PromptBound with nil
//     or ctx's error and the claims it already holds; a claim it took but cannot return (the
//     reply to a claim lost to the cancellation) comes back after its lease, and a receive that
//     outlives the Fetch (sqs, nats) is kept for the next Fetch or given back, never lost. A
//     Publish with a done ctx returns an error wrapping ctx's error or ErrBackendUnavailable;
//     one whose ctx ends during the call returns nil, stored once, or such an error, stored at
//     most once (the node's retry of it may then store a second copy: at-least-once allows the
//     duplicate; losing it does not). The settles, Extend and Depths with a done ctx return nil
//     (the call completed) or such an error, and the claim can be settled afterwards.
//
// # Leases
//
// An adapter reports Claim.LeaseUntil on the node's clock, measured from before its request.
// The node fences a claim at LeaseUntil - LeaseMargin(lease) and settles nothing after it, so a
// backend's lease is the only guarantee Exclusive needs from the adapter: one unexpired lease
// per Exclusive queue.
package core
