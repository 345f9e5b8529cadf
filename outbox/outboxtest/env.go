package outboxtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

// Quiet is the suites' logger: it discards.
var Quiet = slog.New(slog.DiscardHandler)

// Env is one test's database, store, node and queues.
type Env struct {
	*Database
	// Target is the database's target.
	Target *Target
	// Backend records what the store and the node publish.
	Backend *Backend
	// Store is the outbox on the database, not started.
	Store *outbox.Store
	// Node publishes through Store (its handoff and dead-letter sink); not started.
	Node *txmq.Node
	// Orders is a Try queue.
	Orders *txmq.Queue[Msg]
	// Strict is a Require queue of batches of at most two messages.
	Strict *txmq.Queue[Msg]
	// Notes is a Never queue.
	Notes *txmq.Queue[Msg]
	// Biz is the business table's name (Table("biz")), created empty.
	Biz string
}

// Setup makes an Env on a new database of target; mod, if not nil, changes the store's
// options first.
func Setup(t *testing.T, target *Target, mod func(*outbox.Options)) *Env {
	t.Helper()
	e := &Env{Database: target.Open(t), Target: target, Backend: &Backend{}}
	d, err := e.NewDialect(e.DB)
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox.Options{Backend: e.Backend, Logger: Quiet}
	if mod != nil {
		mod(o)
	}
	if e.Store, err = outbox.NewWithDialect(d, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Store.Close(context.Background()) })
	reg := txmq.NewRegistry()
	e.Orders = Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[Msg]{Transactional: txmq.Try}))
	e.Strict = Must(txmq.DeclareIn(reg, "strict", txmq.QueueConfig[Msg]{Transactional: txmq.Require, MaxBatchMessages: 2}))
	e.Notes = Must(txmq.DeclareIn(reg, "notes", txmq.QueueConfig[Msg]{Transactional: txmq.Never}))
	e.Node = Must(txmq.NewNode(e.Backend, &txmq.NodeOptions{Registry: reg, Logger: Quiet, Handoff: e.Store, DeadLetters: e.Store}))
	t.Cleanup(func() { _ = e.Node.Close(context.Background()) })
	e.Biz = e.Table("biz")
	if _, err := e.DB.Exec(fmt.Sprintf(target.BizDDL, e.Biz)); err != nil {
		t.Fatal(err)
	}
	return e
}

// Peer opens another process's store on e's database: a *sql.DB of its own, the same
// backend; closed at the test's cleanup.
func (e *Env) Peer(t *testing.T) *outbox.Store {
	t.Helper()
	other := e.Target.Attach(t, e.Name)
	d, err := other.NewDialect(other.DB)
	if err != nil {
		t.Fatal(err)
	}
	s, err := outbox.NewWithDialect(d, &outbox.Options{Backend: e.Backend, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// Count returns the number of rows of table (an unqualified name) in e's database.
func (e *Env) Count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRow("SELECT COUNT(*) FROM " + e.Table(table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Must returns v, or panics with err.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Pct returns the p-quantile (0 to 1) of d.
func Pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}
