package drain

import (
	"testing"

	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
)

// limited is a backend with a native size limit.
type limited struct {
	core.Backend
	n int
}

func (l limited) MaxBatchBytes() int { return l.n }

func TestMaxBatchBytesIsThePrimarys(t *testing.T) {
	t.Parallel()
	m := memory.New(nil)
	defer m.Close()
	if got := New(limited{Backend: m, n: 1234}, nil, nil).(core.SizeLimiter).MaxBatchBytes(); got != 1234 {
		t.Fatalf("MaxBatchBytes = %d, want the primary's 1234", got)
	}
	if got := New(m, []core.Backend{limited{Backend: m, n: 5}}, nil).(core.SizeLimiter).MaxBatchBytes(); got != 0 {
		t.Fatalf("MaxBatchBytes = %d, want 0 (the primary has no limit; old backends are not published to)", got)
	}
}
