package txmq_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// The app database URL (a URL or a keyword/value connection string) is redacted as backend URLs
// are (TestSecretsNeverLeak, in the adapters/all module, where every scheme is registered).
func TestDatabaseSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"host=127.0.0.1 port=1 user=u dbname=db connect_timeout=1 password=hunter2",
		"host=127.0.0.1 port=1 password='hun ter2' connect_timeout=1",
		"host=127.0.0.1 port=1 password='hunter2",
		"host=127.0.0.1 port=1 sslpassword=hunter2 connect_timeout=1",
		"postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
		"u:hunter2@127.0.0.1:1/db",
		"postgres://u:hunter2@127.0.0.1:port/db",
	} {
		t.Run(raw, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			secret := "hunter2"
			if strings.Contains(raw, "hun ter2") {
				secret = "hun ter2"
			}
			if got := core.Redact(raw); strings.Contains(got, secret) {
				t.Errorf("core.Redact(%q) = %q", raw, got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", DatabaseURL: raw, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err == nil {
				_ = app.Close(ctx)
				t.Fatal("Open of an unreachable database succeeded")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open error leaks the secret: %v", err)
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("logs leak the secret:\n%s", logs.String())
			}
		})
	}
}
