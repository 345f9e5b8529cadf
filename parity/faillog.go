package parity

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// failLogLines is how many of a property's last warnings and errors a failure prints.
const failLogLines = 40

// failLog keeps the last warnings and errors the nodes, stores and ledgers of one property
// logged, and prints them with the property's failure (and only then): a message that was
// never delivered often has its reason there (a flush dropped with outbox_handoff_failed, a
// backend call that timed out), and a quiet run keeps its output short. TXMQ_PARITY_LOG=1
// logs everything, at once, instead.
type failLog struct {
	mu    sync.Mutex
	lines []string
	seen  int
}

// newFailLogger returns a logger of warnings and errors for t's property, printed by a
// cleanup if t failed. Call it before anything that logs is started: the cleanup then runs
// after theirs, so it sees what they logged while closing.
func newFailLogger(t *testing.T) *slog.Logger {
	l := &failLog{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.lines) == 0 {
			t.Logf("parity: the property's nodes logged no warning or error")
			return
		}
		t.Logf("parity: the property's last %d of %d warnings and errors:\n%s", len(l.lines), l.seen, strings.Join(l.lines, ""))
	})
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Write keeps one record (the text handler writes each record in one call).
func (l *failLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if len(l.lines) == failLogLines {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, string(p))
	return len(p), nil
}
