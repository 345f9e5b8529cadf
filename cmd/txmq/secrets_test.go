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

// No command's help (nor the usage printed on a flag error) shows the secrets of the URLs its
// flags default to from the environment (TXMQ_DATABASE_URL, TXMQ_BACKEND, TXMQ_DRAIN_BACKENDS).
// Not parallel: it sets the environment.
func TestHelpRedactsSecrets(t *testing.T) {
	t.Setenv("TXMQ_DATABASE_URL", "postgres://u:hunter2@127.0.0.1:1/db")
	t.Setenv("TXMQ_BACKEND", "redis://u:hunter3@127.0.0.1:1/0")
	t.Setenv("TXMQ_DRAIN_BACKENDS", "nats://hunter4@127.0.0.1:1,memory://")
	covered := map[string]bool{}
	for _, args := range [][]string{
		{"bench", "--help"},
		{"demo", "--help"},
		{"dlq", "ls", "--help"},
		{"dlq", "show", "--help"},
		{"dlq", "replay", "--help"},
		{"dlq", "purge", "--help"},
		{"outbox", "ls", "--help"},
		{"migrate", "--help"},
		{"msg", "ls", "--help"},
		{"msg", "show", "--help"},
		{"queue", "pause", "q", "--help"},
		{"queue", "paused", "--help"},
		{"schedule", "ls", "--help"},
		{"nodes", "--help"},
		{"status", "--help"},
		{"ui", "--help"},
		{"status", "--no-such-flag"},
	} {
		covered[args[0]] = true
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		text := out.String() + errOut.String()
		if code != exitOK && code != exitUsage {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), code, text)
		}
		if !strings.Contains(text, "xxxxx@127.0.0.1:1") {
			t.Errorf("%s: no redacted URL default in the help:\n%s", strings.Join(args, " "), text)
		}
		for _, secret := range []string{"hunter2", "hunter3", "hunter4"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s: the help shows the secret %s:\n%s", strings.Join(args, " "), secret, text)
			}
		}
	}
	for name := range commands {
		if !covered[name] {
			t.Errorf("txmq %s --help is not checked here: add it", name)
		}
	}
}
