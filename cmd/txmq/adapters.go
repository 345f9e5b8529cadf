package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	// Every backend's URL scheme, so --backend and TXMQ_BACKEND accept memory://, postgres://,
	// redis://, sqs:// and nats:// URLs.
	_ "github.com/txmq/txmq/adapters/all"
	// mysql:// and mariadb:// as the app database (--database-url, TXMQ_DATABASE_URL).
	_ "github.com/txmq/txmq/adapters/mysql/appdb"
	// sqlite:// and sqlite3:// as the app database (the outbox and dead letters in the file).
	_ "github.com/txmq/txmq/adapters/sqlite/appdb"
)

// The command reports errors itself; go-redis's own log lines (one per failed dial while
// Redis is down) would only repeat them on stderr.
func init() { goredis.SetLogger(quietLogger{}) }

// quietLogger discards go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
