package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

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
