// Package sqlinspect is the Inspector's walk over the jobs table that the database/sql
// adapters share (adapters/mysql, adapters/sqlite): their core.BatchInspector reads a
// queue's rows page by page in claim index order (run_at, id), and this package keeps the
// position between pages and tells each row's state (ready, delayed, held behind its
// ordering key, in flight) the same way for both. Each adapter supplies its own page query.
package sqlinspect
