package nats

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// drainMeter measures a burn-down's drain, the timed part only: the CPU time this process
// spent per message (the server runs in a process of its own, so this is the client's cost:
// engine and adapter, or the raw loop), the server's (a child process of this one), and, when TXMQ_BENCH_CPUPROFILE names a directory, a
// CPU profile of the drain alone (one file per sub-benchmark), without the prefill's
// publishing that -cpuprofile would mix in.
type drainMeter struct {
	b       *testing.B
	cpu     time.Duration
	server  time.Duration // childrenCPU at the start
	serverK bool          // childrenCPU could be read
	prof    *os.File
}

// startDrain starts measuring; call it right after b.ResetTimer.
func startDrain(b *testing.B) *drainMeter {
	m := &drainMeter{b: b, cpu: processCPU()}
	m.server, m.serverK = childrenCPU()
	if dir := os.Getenv("TXMQ_BENCH_CPUPROFILE"); dir != "" {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name()) + ".cpu"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			b.Fatal(err)
		}
		m.prof = f
	}
	return m
}

// stop ends the measure (call it right after b.StopTimer) and reports cpu-ns/msg, and
// server-cpu-ns/msg when the server is a child process of this one (Linux; in clock ticks of
// 10 ms, so meaningful over a drain of a second or more).
func (m *drainMeter) stop() {
	cpu := processCPU() - m.cpu
	if server, ok := childrenCPU(); ok && m.serverK && server >= m.server {
		m.b.ReportMetric(float64((server-m.server).Nanoseconds())/float64(m.b.N), "server-cpu-ns/msg")
	}
	if m.prof != nil {
		pprof.StopCPUProfile()
		_ = m.prof.Close()
	}
	if cpu > 0 {
		m.b.ReportMetric(float64(cpu.Nanoseconds())/float64(m.b.N), "cpu-ns/msg")
	}
}
