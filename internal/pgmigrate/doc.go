// Package pgmigrate is a tiny versioned migration runner for the tables txmq keeps in an app's
// PostgreSQL database (the outbox, the dead letters, the sqljobs adapter).
//
// A component (for example "outbox") ships its migrations as an fs.FS of files named
// NNNN_name.sql (NNNN a positive version number; "0001_init.sql"). Migrate applies the pending
// ones, in version order, into one target schema, and records each in
// <schema>.txmq_migrations(component, version, applied_at). Each migration runs in its own
// transaction, under a transaction-scoped advisory lock keyed by component and schema, and is
// re-checked under that lock, so concurrent Migrate calls (several app instances starting at
// once) apply every migration exactly once. Re-running Migrate is a no-op.
//
// In the SQL, the placeholder {{schema}} is replaced by the schema as a quoted identifier
// (pgx.Identifier{schema}.Sanitize()), so a file reads
//
//	CREATE TABLE {{schema}}.txmq_outbox (...);
//
// A file may hold several statements; it is run with the simple query protocol.
package pgmigrate
