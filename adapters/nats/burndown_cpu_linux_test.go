//go:build linux

package nats

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// childrenCPU is the CPU time (user and system) used so far by this process's running child
// processes: the nats-server process the benchmarks start (natstest), when TXMQ_NATS_URL is
// not set. ok is false when /proc cannot be read.
func childrenCPU() (d time.Duration, ok bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, false
	}
	me := strconv.Itoa(os.Getpid())
	const tick = 100 // USER_HZ, the unit of utime and stime on Linux
	found := false
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ... utime stime (fields 14 and 15); comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 || f[1] != me {
			continue
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		found = true
		d += time.Duration(ut+st) * time.Second / tick
	}
	return d, found
}
