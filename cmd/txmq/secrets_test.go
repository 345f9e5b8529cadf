package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// No command echoes a secret of a backend or database URL, whatever its form.
func TestCommandsRedactSecrets(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"migrate", "--database-url", "postgres://u:hunter2@127.0.0.1:1/db?sslmode=bogus"},
		{"migrate", "--database-url", "host=127.0.0.1 port=1 sslmode=bogus password='hunter2"},
		{"migrate", "--database-url", "postgres://u:hunter2%zz@127.0.0.1:1/db"},
		{"status", "--backend", "nats://hunter2@127.0.0.1:1", "--queue", "q"},
		{"status", "--backend", "u:hunter2@127.0.0.1:6379", "--queue", "q"},
		{"status", "--backend", "nats://127.0.0.1:1?txmq_servers=nats://hunter2@127.0.0.1:2", "--queue", "q"},
		{"status", "--backend", "memory://", "--drain", "nats://hunter2@127.0.0.1:1", "--queue", "q"},
		{"status", "--backend", "memory://", "--drain", "redis://u:hunter2@127.0.0.1:port", "--queue", "q"},
		{"dlq", "ls", "--database-url", "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1"},
		{"bench", "--backend", "nats://hunter2@127.0.0.1:1", "--messages", "1", "--timeout", "3s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			if code := run(context.Background(), args, &out, &errOut); code != exitError && code != exitUsage {
				t.Fatalf("exit %d, want %d or %d\n%s%s", code, exitError, exitUsage, out.String(), errOut.String())
			}
			if strings.Contains(out.String()+errOut.String(), "hunter2") {
				t.Fatalf("output leaks a secret:\n%s%s", out.String(), errOut.String())
			}
		})
	}
}
