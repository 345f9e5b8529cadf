package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a slog handler.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGoRedisLogsRouted: with GoRedisLogs, go-redis's "failed to dial" line goes to the
// Backend's Logger at Debug level instead of stderr.
func TestGoRedisLogsRouted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: every dial is refused

	var buf lockedBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := goRedisLog.Load()
	t.Cleanup(func() { goRedisLog.Store(prev) })
	be, err := New(&Options{Addr: addr, Logger: logger, GoRedisLogs: true, DialTimeout: time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	err = be.Publish(context.Background(), core.OutgoingBatch{ID: "b1", Queue: "q", Body: []byte("x")})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("publish to a closed port: %v, want ErrBackendUnavailable", err)
	}
	out := buf.String()
	if !strings.Contains(out, "failed to dial") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "go-redis") {
		t.Fatalf("go-redis's dial failure was not routed to the Logger at Debug; log:\n%s", out)
	}
}
