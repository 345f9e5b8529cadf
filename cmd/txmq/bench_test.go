package main

import (
	"encoding/json"
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
