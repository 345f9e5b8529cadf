package txmq_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// Signup and Signups are what the README's fragments after the Quick start refer to.
type Signup struct {
	Email string `json:"email"`
}

var Signups = txmq.MustDeclare("readme-signups", txmq.QueueConfig[Signup]{Transactional: txmq.Try})

// welcomed receives what welcome handled, for the tests.
var welcomed = make(chan string, 16)

func welcome(_ context.Context, msgs []Signup) error {
	for _, m := range msgs {
		welcomed <- m.Email
	}
	return nil
}

// backendIsASetting is the README's "The backend is a setting" fragment, between the markers,
// indented by one tab.
func backendIsASetting(ctx context.Context) error {
	// README:begin backend
	// Stop on SIGINT or SIGTERM (a deploy, Ctrl-C).
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := txmq.Open(ctx, nil) // reads TXMQ_BACKEND, TXMQ_DATABASE_URL, TXMQ_DRAIN_BACKENDS, ...
	if err != nil {
		return err
	}
	defer func() {
		// A bounded shutdown: Close's ctx bounds only the wait for running listeners; stay
		// under the orchestrator's grace period (Kubernetes: 30s).
		closeCtx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		if err := app.Close(closeCtx); err != nil {
			slog.Error("txmq: runs cut short at shutdown", "error", err)
		}
	}()
	if err := Signups.Listen(app.Node, welcome); err != nil {
		return err
	}
	if err := app.Node.Start(ctx); err != nil {
		return err
	}
	// Publish inside your transaction: this needs TXMQ_DATABASE_URL (without it, RunInTx
	// returns txmq.ErrNoDatabase, which names the setting).
	err = app.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// your writes with tx, then, with the same ctx:
		return Signups.Publish(ctx, app.Node, Signup{Email: "ada@example.com"})
	})
	if err != nil {
		return err
	}
	<-ctx.Done() // the app runs until it is told to stop
	// README:end backend
	return nil
}

// README:begin ordering
// Entry is one change to an account's balance.
type Entry struct {
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

var Ledger = txmq.MustDeclare("ledger", txmq.QueueConfig[Entry]{Transactional: txmq.Try, Ordered: true})

func record(ctx context.Context, node *txmq.Node, entry Entry) error {
	return Ledger.Publish(ctx, node, entry, txmq.Key(entry.Account)) // no key: an error naming the queue
}

// README:end ordering

// README:begin priorities
// Email is one email to send.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

var Emails = txmq.MustDeclare("emails", txmq.QueueConfig[Email]{
	Transactional: txmq.Try,
	Prioritized:   true,
	PriorityAging: 10 * time.Second, // W: one level is worth 10 s of waiting (default 1 s)
})

func sendReset(ctx context.Context, node *txmq.Node, to string) error {
	return Emails.Publish(ctx, node, Email{To: to, Subject: "password reset"}, txmq.Priority(9))
}

// README:end priorities

// fragment returns the code between the markers "// README:begin NAME" and "// README:end
// NAME" in file, with one tab of indentation removed when the fragment is a function body
// (indented).
func fragment(t *testing.T, file, name string, indented bool) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin, end := "// README:begin "+name+"\n", "// README:end "+name+"\n"
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no README markers for %s", file, name)
	}
	body := strings.TrimRight(s[i+len(begin):j], "\t")
	if !indented {
		return strings.TrimRight(body, "\n") + "\n"
	}
	var out []string
	for _, l := range strings.Split(body, "\n") {
		out = append(out, strings.TrimPrefix(l, "\t"))
	}
	return strings.Join(out, "\n")
}

// TestReadmeBackendIsASetting: the README's fragment is the code above, and it runs: with a
// database it publishes in a transaction and the listener gets the message; without one it
// returns outbox.ErrNoDatabase instead of panicking. Not parallel: it sets the environment.
func TestReadmeBackendIsASetting(t *testing.T) {
	if got, want := readmeBlock(t, "## The backend is a setting", "go"), fragment(t, "readme_snippets_test.go", "backend", true); got != want {
		t.Fatalf("the README's fragment differs from backendIsASetting in readme_snippets_test.go:\nREADME:\n%s\ncode:\n%s", got, want)
	}
	ctx := context.Background()
	t.Setenv("TXMQ_BACKEND", "memory://")
	t.Setenv("TXMQ_DATABASE_URL", "")
	if err := backendIsASetting(ctx); !errors.Is(err, txmq.ErrNoDatabase) {
		t.Fatalf("without a database: %v; want txmq.ErrNoDatabase", err)
	}
	pool := testenv.PostgresPool(t)
	t.Setenv("TXMQ_DATABASE_URL", testenv.PostgresURL(t))
	t.Setenv("TXMQ_SCHEMA", testenv.PostgresSchema(t, pool))
	// The signal: the listener got the published signup, or 20s passed.
	ctx, cancel := context.WithCancel(ctx)
	handled := make(chan bool, 1)
	go func() {
		defer cancel()
		select {
		case <-welcomed:
			handled <- true
		case <-time.After(20 * time.Second):
			handled <- false
		}
	}()
	if err := backendIsASetting(ctx); err != nil {
		t.Fatalf("with a database: %v", err)
	}
	if !<-handled {
		t.Fatal("the published signup was not handled within 20s")
	}
}

// TestReadmeOrdering: the Ordering fragment of the docs (docs/guide.md) is the code above
// between the ordering markers, and it runs: entries published with their account as key reach
// the listener in publish order per account, and a publish without a key is refused with an
// error naming the queue.
func TestReadmeOrdering(t *testing.T) {
	t.Parallel()
	if got, want := readmeBlock(t, "## Ordering", "go"), fragment(t, "readme_snippets_test.go", "ordering", false); got != want {
		t.Fatalf("the docs' Ordering fragment differs from the ordering fragment of readme_snippets_test.go:\ndoc:\n%s\ncode:\n%s", got, want)
	}
	ctx := context.Background()
	be, err := core.OpenBackend(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	node, err := txmq.NewNode(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	got := make(chan Entry, 64)
	if err := Ledger.Listen(node, func(_ context.Context, msgs []Entry) error {
		for _, m := range msgs {
			got <- m
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const perAccount = 10
	for i := range perAccount {
		for _, acct := range []string{"acct-a", "acct-b"} {
			if err := record(ctx, node, Entry{Account: acct, Cents: int64(i)}); err != nil {
				t.Fatalf("record: %v", err)
			}
		}
	}
	next := map[string]int64{}
	deadline := time.After(20 * time.Second)
	for len(next) < 2 || next["acct-a"] < perAccount || next["acct-b"] < perAccount {
		select {
		case e := <-got:
			// At-least-once: a repeat of the previous entry may come, never one out of order.
			if e.Cents != next[e.Account] && e.Cents != next[e.Account]-1 {
				t.Fatalf("%s: got entry %d, want %d (publish order)", e.Account, e.Cents, next[e.Account])
			}
			next[e.Account] = e.Cents + 1
		case <-deadline:
			t.Fatalf("not every entry arrived within 20s: next per account %v", next)
		}
	}
	err = Ledger.Publish(ctx, node, Entry{Account: "acct-a"})
	if err == nil || !strings.Contains(err.Error(), "ledger") {
		t.Fatalf("publish without a key: %v; want an error naming the queue", err)
	}
}
