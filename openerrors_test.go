package txmq

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

// Open's errors read well for an operator: one "txmq:" prefix, the cause once, the setting to
// change, and no parser text for a URL of another database.
func TestOpenErrorsForOperators(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantIs  error
		want    []string
		notWant []string
	}{
		{"database URL of another scheme", Config{Backend: "memory://", DatabaseURL: "mysql://u:p@db.example/app"}, core.ErrInvalidConfig,
			[]string{"TXMQ_DATABASE_URL mysql://u:xxxxx@db.example/app", `unknown scheme "mysql"`, "expected postgres://",
				`import _ "github.com/txmq/txmq/adapters/mysql/appdb" to use mysql:// as the app database`}, []string{"keyword/value", "xxxxxarse"}},
		{"database URL of sqlite", Config{Backend: "memory://", DatabaseURL: "sqlite://app.db"}, core.ErrInvalidConfig,
			[]string{"TXMQ_DATABASE_URL sqlite://app.db", `unknown scheme "sqlite"`, "sqlite://app.db (SQLite)",
				`import _ "github.com/txmq/txmq/adapters/sqlite/appdb" to use sqlite:// as the app database`}, []string{"keyword/value"}},
		{"database URL of sqlite without slashes", Config{Backend: "memory://", DatabaseURL: "sqlite:app.db"}, core.ErrInvalidConfig,
			[]string{`unknown scheme "sqlite"`, `import _ "github.com/txmq/txmq/adapters/sqlite/appdb"`}, []string{"keyword/value"}},
		{"database on a wrong port", Config{Backend: "memory://", DatabaseURL: "postgres://postgres@127.0.0.1:1/test?connect_timeout=5"}, nil,
			[]string{"TXMQ_DATABASE_URL", "connection refused"}, nil},
		{"backend option the adapter rejects", Config{Backend: "redis://127.0.0.1:6379/0?bogus=1"}, core.ErrInvalidConfig,
			[]string{"TXMQ_BACKEND", "bogus"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app, err := Open(context.Background(), &tt.cfg)
			if err == nil {
				_ = app.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("%v does not wrap %v", err, tt.wantIs)
			}
			if n := strings.Count(msg, "txmq:"); n != 1 || !strings.HasPrefix(msg, "txmq: ") {
				t.Errorf("want one txmq: prefix, at the start: %s", msg)
			}
			if strings.Count(msg, "connection refused") > 1 {
				t.Errorf("the cause is repeated: %s", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("lacks %q: %s", w, msg)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("has %q: %s", w, msg)
				}
			}
		})
	}
}
