package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server-side figures of a run (-stats): Redis command counts before and after.

func commandStats(ctx context.Context, rdb *goredis.Client) map[string]int64 {
	out := map[string]int64{}
	if !*stats {
		return out
	}
	info, err := rdb.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name == "total_reads_processed" {
			n, _ := strconv.ParseInt(rest, 10, 64)
			out[readsKey] = n
			continue
		}
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// printStats prints the commands the server ran per batch since before (other clients of a
// shared server are counted too).
func printStats(ctx context.Context, rdb *goredis.Client, before map[string]int64, batches int) {
	if !*stats {
		return
	}
	after := commandStats(ctx, rdb)
	var parts []string
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" && name != readsKey {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(d)/float64(batches)))
		}
	}
	sort.Strings(parts)
	fmt.Printf("    commands per batch (incl. publishing and cleanup): %s\n", strings.Join(parts, ", "))
	fmt.Printf("    round trips per batch (the server's reads, incl. publishing): %.2f\n", float64(after[readsKey]-before[readsKey])/float64(batches))
}

// readsKey is where commandStats keeps the server's total_reads_processed (INFO stats): one
// per read of a client's socket, so about one per round trip (a pipeline is one).

// cpuMeter measures the CPU one drain costs per message (-stats): this process's and the
// Redis server's (INFO cpu; on a shared server other clients' work counts too, so measure on a
// Redis of its own).
type cpuMeter struct {
	rdb          *goredis.Client
	node0        time.Duration
	server0      float64
	node, server float64 // µs per message, set by stop
	usec0        map[string][2]int64
	usec         string // server time and calls per message by command, set by stop
	mallocs0     uint64
	allocs       float64 // heap allocations of this process per message, set by stop
}

// commandUsec reads the server's cumulative calls and µs per command (INFO commandstats).
func commandUsec(ctx context.Context, rdb *goredis.Client) map[string][2]int64 {
	out := map[string][2]int64{}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var v [2]int64
		for _, kv := range strings.Split(rest, ",") {
			if c, ok := strings.CutPrefix(kv, "calls="); ok {
				v[0], _ = strconv.ParseInt(c, 10, 64)
			}
			if u, ok := strings.CutPrefix(kv, "usec="); ok {
				v[1], _ = strconv.ParseInt(u, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out
}

// start records the CPU used so far.
func (m *cpuMeter) start(ctx context.Context) {
	m.node0 = processCPU()
	if *stats {
		m.server0 = serverCPU(ctx, m.rdb)
		m.usec0 = commandUsec(ctx, m.rdb)
		m.mallocs0 = mallocs()
	}
}

// mallocs returns the heap allocations this process made so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// stop sets the CPU used since start per message, for n messages.
func (m *cpuMeter) stop(ctx context.Context, n int) {
	m.node = float64((processCPU() - m.node0).Microseconds()) / float64(n)
	if *stats {
		m.allocs = float64(mallocs()-m.mallocs0) / float64(n)
		m.server = (serverCPU(ctx, m.rdb) - m.server0) * 1e6 / float64(n)
		var parts []string
		for name, v := range commandUsec(ctx, m.rdb) {
			c, u := v[0]-m.usec0[name][0], v[1]-m.usec0[name][1]
			if c > 0 && name != "info" {
				parts = append(parts, fmt.Sprintf("%s %.2f calls %.2f µs", name, float64(c)/float64(n), float64(u)/float64(n)))
			}
		}
		sort.Strings(parts)
		m.usec = strings.Join(parts, ", ")
	}
}

// print prints the figures of stop (with -stats).
func (m *cpuMeter) print() {
	if *stats {
		fmt.Printf("    CPU per message while draining: process %.1f µs, Redis server %.1f µs, total %.1f µs; process heap allocations %.1f per message\n", m.node, m.server, m.node+m.server, m.allocs)
		fmt.Printf("    server commands per message while draining (calls, µs): %s\n", m.usec)
	}
}
