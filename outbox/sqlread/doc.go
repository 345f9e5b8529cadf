// Package sqlread holds the reads of the outbox's tables that the database/sql dialects
// (adapters/mysql/appdb, adapters/sqlite/appdb) share: the same SELECT and the same scan of
// its rows into the outbox's types, the tables named as each dialect's statements name them
// (schema-qualified on MySQL, bare on SQLite). Times are microseconds since the Unix epoch,
// as in every table of the outbox.
//
// Each function runs one query on the Querier it is given and returns what it read; the
// dialect runs it inside its own call policy (MySQL's sqlcall.Runner, SQLite's retry after
// lock contention), so a function may run more than once for one call and keeps no state
// between runs. Writes differ between the dialects and stay in each.
package sqlread
