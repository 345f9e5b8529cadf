package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"no args", nil, exitUsage, "Commands:", ""},
		{"help", []string{"--help"}, exitOK, "demo", ""},
		{"unknown", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"demo bad flag", []string{"demo", "-bogus"}, exitUsage, "", "-bogus"},
		{"demo bad n", []string{"demo", "-n", "0"}, exitUsage, "", "-n must be at least 1"},
		{"demo help", []string{"demo", "-h"}, exitOK, "", "Usage: txmq demo"},
		{"demo", []string{"demo", "-n", "250"}, exitOK, "delivered      250 messages", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out.String(), errOut.String())
			}
		})
	}
}

// TestDemoBinary builds the command and runs `txmq demo` as a newcomer would.
func TestDemoBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "txmq")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	out, err := exec.Command(bin, "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("txmq demo: %v\n%s", err, out)
	}
	for _, want := range []string{"summary:", "delivered      2000 messages", "reason=delivery_exhausted attempts=3"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("txmq demo output lacks %q:\n%s", want, out)
		}
	}
}
