package memory_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// largeDoc is a message carrying one large document.
type largeDoc struct {
	Doc string `json:"doc"`
}

// heapPeak samples the live heap every millisecond until stop is called and returns the
// highest HeapAlloc seen.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// BenchmarkLargeMessage publishes one 100 MiB message through a node on the memory backend and
// waits for its delivery (publish, encode, store, fetch, decode, run, ack). It reports the
// bytes allocated and the peak live heap above the baseline, each as a multiple of the payload
// size (alloc-x, peak-x): the memory one large message costs. Run it with -benchtime=3x.
func BenchmarkLargeMessage(b *testing.B) {
	const size = 100 << 20
	be := memory.New(nil)
	defer be.Close()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "large", txmq.QueueConfig[largeDoc]{Transactional: txmq.Try, MaxMessageBytes: txmq.NoSizeLimit, MaxBatchBytes: txmq.NoSizeLimit})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		FlushTick: time.Millisecond, FlushWindow: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan int, 1)
	if err := q.Listen(n, func(_ context.Context, msgs []largeDoc) error {
		got <- len(msgs[0].Doc)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close(ctx) }()
	doc := strings.Repeat("d", size)
	b.ReportAllocs()
	b.ResetTimer()
	var allocX, peakX float64
	for range b.N {
		b.StopTimer()
		runtime.GC()
		debug.FreeOSMemory()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := heapPeak()
		b.StartTimer()
		if err := q.Publish(ctx, n, largeDoc{Doc: doc}); err != nil {
			b.Fatal(err)
		}
		if l := <-got; l != size {
			b.Fatalf("delivered %d bytes, want %d", l, size)
		}
		b.StopTimer()
		peak := stop()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		allocX += float64(after.TotalAlloc-before.TotalAlloc) / size
		if peak > before.HeapAlloc {
			peakX = max(peakX, float64(peak-before.HeapAlloc)/size)
		}
		b.StartTimer()
	}
	b.ReportMetric(allocX/float64(b.N), "alloc-x")
	b.ReportMetric(peakX, "peak-x")
}
