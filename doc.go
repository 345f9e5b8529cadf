// Package txmq opens a txmq app from settings: the backend, the app database with the
// transactional outbox and dead letters, and the old backends to drain after a swap. It is the
// one-setting entry point; package core is the API the app then uses (declaring queues,
// listening, publishing), and core's doc explains the semantics.
//
//	app, err := txmq.Open(ctx, nil) // reads TXMQ_BACKEND, TXMQ_DATABASE_URL, ...
//	if err != nil { ... }
//	defer app.Close(context.Background())
//	_ = Emails.Listen(app.Node, sendEmail)
//	_ = app.Node.Start(ctx)
//	err = app.Store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
//		// business writes with tx, then:
//		return Emails.Publish(ctx, app.Node, Email{To: "a@example.com"})
//	})
//
// # Settings
//
//	TXMQ_BACKEND               backend URL; default memory://. Every adapter's scheme is
//	                           registered (this package imports adapters/all): memory://,
//	                           postgres:// (SQL jobs), redis://, rediss://, sqs://, awssqs://,
//	                           nats://. Each adapter documents its URL's parameters.
//	TXMQ_DATABASE_URL          the app's PostgreSQL database; optional. With it: the outbox
//	                           (publishing inside transactions, handoff when the backend
//	                           refuses a flush) and the dead-letter table.
//	TXMQ_SCHEMA                schema of every txmq table of the app: outbox, dead letters and,
//	                           on a postgres:// backend, the jobs table (added to the URL as
//	                           txmq_schema). Default: the URL's txmq_schema, else txmq. Both
//	                           set and different is an error naming both.
//	TXMQ_MIGRATE               false: do not create or upgrade the tables at Open.
//	TXMQ_DRAIN_BACKENDS        old backend URLs, comma-separated, to drain after a swap.
//	TXMQ_DRAIN_CHECK_INTERVAL  how often an old backend's depths are checked; default 5s.
//	TXMQ_DRAIN_RECHECK_INTERVAL how often a drained old backend is checked again for batches
//	                           nodes on the old setting published since; default 30s.
//
// Secrets in URLs and connection strings (passwords, user-info tokens such as nats://TOKEN@host,
// password-, token- and key-like parameters) are never logged nor put in errors: see core.Redact.
//
// # Swapping the backend
//
// To move an app from SQL jobs to Redis with nothing lost: set TXMQ_BACKEND to the Redis URL
// and TXMQ_DRAIN_BACKENDS to the old postgres:// URL, and restart the nodes. They publish to
// Redis at once (outbox rows written before the switch included: the outbox relays them to
// the current backend), and keep running the batches left in SQL jobs until it is empty, then
// stop polling it (logged per node). During a rolling deploy, nodes not restarted yet still
// publish to SQL jobs: the new nodes re-check it every TXMQ_DRAIN_RECHECK_INTERVAL and poll it
// again when it holds batches. When no node runs the old setting any more and
// `txmq status --drain` shows the old backend empty, remove TXMQ_DRAIN_BACKENDS at the next
// deploy. See package drain for the details (exclusive queues, retries of old batches,
// backends with approximate counts).
package txmq
