package txmqtest_test

import (
	"context"
	"github.com/txmq/txmq/txmqtest/testenv"
	"os"
	"strings"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/txmqtest"
)

type Signup struct {
	Email string `json:"email"`
}

// README:begin
func TestSignup(t *testing.T) {
	k := txmqtest.New(t, &txmqtest.Options{DuplicateDelivery: true}) // every batch arrives twice
	q := txmqtest.DeclareIn(k, "signups", txmq.QueueConfig[Signup]{Transactional: txmq.Try})
	n := k.Node(nil) // started, closed at cleanup
	welcomed := txmqtest.NewRecorder(func(s Signup) string { return s.Email })
	if err := welcomed.Listen(q, n, nil); err != nil { // your listener goes in place of nil
		t.Fatal(err)
	}
	if err := q.Publish(context.Background(), n, Signup{Email: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	txmqtest.WaitIdle(t, n)
	if !welcomed.Has("ada@example.com") || welcomed.Distinct() != 1 {
		t.Fatalf("welcomed %s", welcomed.Summary()) // duplicates are fine: listeners are idempotent
	}
}

// README:end

// TestReadmeTestingYourApp: the "Testing your app" block (docs/guide.md, or wherever README.md
// and docs/*.md hold it) is TestSignup above.
func TestReadmeTestingYourApp(t *testing.T) {
	t.Parallel()
	name, readme := testenv.DocWith(t, "..", "\n## Testing your app\n")
	readme = readme[strings.Index(readme, "\n## Testing your app\n"):]
	j := strings.Index(readme, "```go\n")
	k := strings.Index(readme[j+6:], "```\n")
	if j < 0 || k < 0 {
		t.Fatal("no go block in the Testing your app section")
	}
	got := readme[j+6 : j+6+k]
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	want := s[strings.Index(s, "// README:begin\n")+len("// README:begin\n") : strings.Index(s, "\n// README:end\n")]
	if got != want {
		t.Fatalf("the Testing your app block of %s differs from TestSignup in txmqtest/readme_test.go:\ndoc:\n%s\ncode:\n%s", name, got, want)
	}
}
