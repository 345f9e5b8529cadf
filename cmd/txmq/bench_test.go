package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBench(t *testing.T) {
	t.Parallel()
	out, _ := cli(t, exitOK, "bench", "--backend", "memory://", "--messages", "500", "--batch", "50", "--concurrency", "4", "--size", "200")
	for _, want := range []string{"backend      memory://", "delivered    500 messages", "msgs/s", "pickup       p50 "} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench output lacks %q:\n%s", want, out)
		}
	}
	out, _ = cli(t, exitOK, "bench", "--backend", "memory://", "--rate", "200", "--duration", "500ms", "--json")
	var res benchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if res.Messages != 100 || res.MsgsPerSec <= 0 || res.PickupP99Ms < res.PickupP50Ms || res.RatePerSec != 200 {
		t.Fatalf("bench --json: %+v", res)
	}
}

// TestBenchCPUProfile: --cpuprofile writes a profile of the run, and a path it cannot create
// fails the command naming the flag.
func TestBenchCPUProfile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cpu.prof")
	out, errOut := cli(t, exitOK, "bench", "--backend", "memory://", "--messages", "200", "--batch", "1", "--cpuprofile", path)
	if !strings.Contains(out, "delivered    200 messages") {
		t.Fatalf("bench output lacks the delivery line:\n%s%s", out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof writes a gzipped protobuf
		t.Fatalf("--cpuprofile wrote %d bytes that are not a gzipped profile", len(b))
	}
	_, errOut = cli(t, exitError, "bench", "--backend", "memory://", "--messages", "10", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))
	if !strings.Contains(errOut, "--cpuprofile") {
		t.Fatalf("stderr does not name --cpuprofile:\n%s", errOut)
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"bench", "--backend", ""}, exitUsage, "no backend"},
		{[]string{"bench", "--backend", "memory://", "--messages", "0"}, exitUsage, "--messages must be at least 1"},
		{[]string{"bench", "--backend", "memory://", "--rate", "10"}, exitUsage, "--duration"},
		{[]string{"bench", "--backend", "memory://", "extra"}, exitUsage, "unexpected argument"},
		{[]string{"bench", "--backend", "memory://?bogus=1"}, exitUsage, "unknown parameter"},
		{[]string{"bench", "--backend", "redis://:hunter2@127.0.0.1:1/0", "--messages", "5", "--timeout", "3s"}, exitError, "txmq bench:"},
		{[]string{"bench", "-h"}, exitOK, "Usage: txmq bench"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			t.Parallel()
			_, errOut := cli(t, tt.code, tt.args...)
			if !strings.Contains(errOut, tt.wantErr) || strings.Contains(errOut, "hunter2") {
				t.Fatalf("stderr lacks %q (or leaks a password):\n%s", tt.wantErr, errOut)
			}
		})
	}
}
