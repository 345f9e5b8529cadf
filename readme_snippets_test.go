package txmq_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
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
	// README:begin
	app, err := txmq.Open(ctx, nil) // reads TXMQ_BACKEND, TXMQ_DATABASE_URL, TXMQ_DRAIN_BACKENDS, ...
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
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
	// ... the app runs until it is told to stop ...
	// README:end
	select {
	case <-welcomed:
		return nil
	case <-time.After(20 * time.Second):
		return errors.New("the published signup was not handled within 20s")
	}
}

// fragment returns the code between the markers in fn's source file, one tab of indentation
// removed.
func fragment(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "// README:begin\n")
	j := strings.Index(s, "\t// README:end\n")
	if i < 0 || j < i {
		t.Fatalf("%s: no README markers", file)
	}
	var out []string
	for _, l := range strings.Split(s[i+len("// README:begin\n"):j], "\n") {
		out = append(out, strings.TrimPrefix(l, "\t"))
	}
	return strings.Join(out, "\n")
}

// TestReadmeBackendIsASetting: the README's fragment is the code above, and it runs: with a
// database it publishes in a transaction and the listener gets the message; without one it
// returns outbox.ErrNoDatabase instead of panicking. Not parallel: it sets the environment.
func TestReadmeBackendIsASetting(t *testing.T) {
	if got, want := readmeBlock(t, "## The backend is a setting", "go"), fragment(t, "readme_snippets_test.go"); got != want {
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
	if err := backendIsASetting(ctx); err != nil {
		t.Fatalf("with a database: %v", err)
	}
}
