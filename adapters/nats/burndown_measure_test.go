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
// engine and adapter, or the raw loop), and, when TXMQ_BENCH_CPUPROFILE names a directory, a
// CPU profile of the drain alone (one file per sub-benchmark), without the prefill's
// publishing that -cpuprofile would mix in.
type drainMeter struct {
	b    *testing.B
	cpu  time.Duration
	prof *os.File
}

// startDrain starts measuring; call it right after b.ResetTimer.
func startDrain(b *testing.B) *drainMeter {
	m := &drainMeter{b: b, cpu: processCPU()}
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

// stop ends the measure (call it right after b.StopTimer) and reports cpu-ns/msg.
func (m *drainMeter) stop() {
	cpu := processCPU() - m.cpu
	if m.prof != nil {
		pprof.StopCPUProfile()
		_ = m.prof.Close()
	}
	if cpu > 0 {
		m.b.ReportMetric(float64(cpu.Nanoseconds())/float64(m.b.N), "cpu-ns/msg")
	}
}
