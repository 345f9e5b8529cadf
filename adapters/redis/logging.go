package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// goRedisLog is the logger go-redis's own log lines go to once a Backend asked for it
// (Options.GoRedisLogs): the Logger of the last Backend that did.
var goRedisLog atomic.Pointer[slog.Logger]

// routeGoRedisLogs sends every go-redis log line in the process to l, at Debug level.
// go-redis has one logger per process (goredis.SetLogger), not one per client, so this is
// process-wide: it also takes the lines of other go-redis clients, and it replaces a logger
// the app set before (an app that sets its own after New keeps its own).
func routeGoRedisLogs(l *slog.Logger) {
	goRedisLog.Store(l)
	goredis.SetLogger(slogPrinter{})
}

// slogPrinter is the go-redis logger that forwards to goRedisLog.
type slogPrinter struct{}

func (slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	l := goRedisLog.Load()
	if l == nil {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.Log(ctx, slog.LevelDebug, "txmq redis: go-redis: "+msg)
}
