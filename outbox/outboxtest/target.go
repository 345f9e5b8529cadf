package outboxtest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// Target is the app database the suites run on: what differs between the dialects.
type Target struct {
	// Dialect is the name Store.Dialect reports ("mysql", "sqlite").
	Dialect string
	// Label names the database in the figures' lines ("mariadb", "sqlite").
	Label string
	// Open makes a database of the test's own with the outbox tables migrated, removed at
	// the test's cleanup.
	Open func(t testing.TB) *Database
	// Attach opens the database named name (a Database.Name) again, as another process
	// would: a *sql.DB of its own, closed at the test's cleanup.
	Attach func(t testing.TB, name string) *Database
	// BizDDL creates the business table: a format with one %s, the table's name, for a
	// table of one integer primary key column id.
	BizDDL string
	// Now is the time on the clock the control tables stamp their rows with (the
	// database's, or the machine's).
	Now func(t testing.TB, db *sql.DB) time.Time
	// Config points an app's config at the database named name: its DatabaseURL and
	// Schema, and, with jobs set, its Backend at the adapter's SQL jobs in the same
	// database (with the outbox settings the crash test needs on this database).
	Config func(t testing.TB, name string, jobs bool, cfg *txmq.Config)
	// CrashWait bounds the wait of TestCrashWindow's survivor for every committed message.
	CrashWait time.Duration
}

// Database is one test's app database.
type Database struct {
	// DB is a handle on it.
	DB *sql.DB
	// Name identifies it for Target.Attach and Target.Config (a schema, a file's path).
	Name string
	// Table returns the name of table in it as statements on DB name it.
	Table func(table string) string
	// NewDialect returns the outbox dialect on db, a handle on this database.
	NewDialect func(db *sql.DB) (outbox.Dialect, error)
}
