package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestMySQLAppDatabaseCommands: with a mysql:// app database, migrate creates the outbox
// tables in the schema's database, dlq and status read them, and queue pause, paused, resume
// and schedule ls work on its control tables.
func TestMySQLAppDatabaseCommands(t *testing.T) {
	t.Parallel()
	raw := "mysql://root@127.0.0.1:3306/test"
	if v := strings.TrimSpace(os.Getenv("TXMQ_MYSQL_URL")); v != "" {
		raw = v
	}
	dsn := mysqlDSN(t, raw)
	testenv.Check(t, "MySQL/MariaDB", "TXMQ_MYSQL_URL", raw, func(ctx context.Context, _ string) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	schema := testenv.UniqueName("txmq_cli_")
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", dsn); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + schema)
			_ = db.Close()
		}
	})
	dbArgs := []string{"--database-url", raw, "--schema", schema}
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != wantCode {
			t.Fatalf("txmq %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	if out := cli(exitOK, append([]string{"migrate"}, dbArgs...)...); !strings.Contains(out, "up to date") {
		t.Fatalf("migrate: %s", out)
	}
	if out := cli(exitOK, append([]string{"dlq", "ls"}, dbArgs...)...); !strings.Contains(out, "no dead letters") {
		t.Fatalf("dlq ls: %s", out)
	}
	// Pause marks and schedules are the MySQL database's (outbox.ControlDialect).
	if out := cli(exitOK, append([]string{"queue", "pause", "emails", "--by", "ops", "--create"}, dbArgs...)...); !strings.Contains(out, "paused emails") {
		t.Fatalf("queue pause: %s", out)
	}
	if out := cli(exitOK, append([]string{"queue", "paused"}, dbArgs...)...); !strings.Contains(out, "emails") || !strings.Contains(out, "ops") {
		t.Fatalf("queue paused: %s", out)
	}
	cli(exitOK, append([]string{"queue", "resume", "emails"}, dbArgs...)...)
	if out := cli(exitOK, append([]string{"queue", "paused"}, dbArgs...)...); !strings.Contains(out, "no queue is paused") {
		t.Fatalf("queue paused after resume: %s", out)
	}
	if out := cli(exitOK, append([]string{"schedule", "ls"}, dbArgs...)...); !strings.Contains(out, "no schedule") {
		t.Fatalf("schedule ls: %s", out)
	}
	backend := raw + "?txmq_schema=" + schema
	if out := cli(exitOK, append([]string{"status", "--backend", backend}, dbArgs...)...); !strings.Contains(out, "no outbox rows or dead letters") {
		t.Fatalf("status: %s", out)
	}
}

// mysqlDSN turns a mysql://user[:password]@host:port/db URL into the driver's DSN.
func mysqlDSN(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("TXMQ_MYSQL_URL %q: %v", raw, err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	return fmt.Sprintf("%s@tcp(%s)/%s", u.User.String(), host, strings.TrimPrefix(u.Path, "/"))
}
